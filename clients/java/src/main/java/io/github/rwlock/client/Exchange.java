package io.github.rwlock.client;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import redis.clients.jedis.exceptions.JedisConnectionException;
import redis.clients.jedis.exceptions.JedisDataException;
import redis.clients.jedis.exceptions.JedisMovedDataException;

/**
 * One lock's round trips with the server, apart from what this process knows of its holds
 * ({@link DistributedLock}): an acquisition with its replica checks in one pipeline, a release
 * with its request id, its latches' {@code DEL} and its one resend, and {@code MOVED} followed.
 */
final class Exchange {
    /** Added to a blocking call's wait for its reply to arrive. */
    static final long REPLY_MARGIN_MS = 5_000;

    private final Client client;
    private final Plan plan;

    Exchange(Client client, Plan plan) {
        this.client = client;
        this.plan = plan;
    }

    /** An acquisition's reply, and what its replica check found short (null: acknowledged). */
    record Sent(Object reply, String unsynced) {}

    /**
     * One acquisition in one round trip: the command, after a resend its {@code touch}, then what
     * the replica check sends for its master ({@link Masters}: {@code WAIT}, {@code WAITAOF},
     * now and then {@code INFO}), pipelined on the link and read within the wait, the checks'
     * timeouts and a margin. The master's INFO is asked first, in a round trip of its own, only
     * when nothing is known of it yet.
     */
    Sent send(Link link, List<String> args, List<String> touch, long blockMs, boolean interruptible)
            throws Waiter.Cancelled {
        ReplicaSync sync = client.getReplicaSync();
        Masters masters = client.masters();
        while (true) {
            String master = link.master();
            Masters.Checks checks = masters.plan(master, sync, System.nanoTime());
            if (checks == null) {
                long asked = System.nanoTime();
                masters.learn(master, link.call(Masters.INFO, Link.DEFAULT), asked);
                checks = Objects.requireNonNull(masters.plan(master, sync, System.nanoTime()), "learned");
            }
            List<List<String>> commands = new ArrayList<>();
            commands.add(args);
            if (touch != null) {
                commands.add(touch);
            }
            commands.addAll(checks.commands());
            long extra = checks.extraMs();
            long timeout = blockMs == Plan.NO_BLOCK ? (extra == 0 ? Link.DEFAULT : extra + REPLY_MARGIN_MS)
                    : blockMs == 0 ? 0 : blockMs + extra + REPLY_MARGIN_MS;
            List<Object> replies = interruptible && blockMs != Plan.NO_BLOCK
                    ? Waiter.call(client.waiters(), client.connector(), link, commands, timeout)
                    : link.pipeline(commands, timeout, null);
            Object reply = replies.get(0);
            if (reply instanceof JedisMovedDataException moved && link.follow(moved)) {
                continue;
            }
            if (reply instanceof JedisDataException e) {
                String message = String.valueOf(e.getMessage());
                if (message.startsWith("NON_REENTRANT")) {
                    throw new NotReentrantException(plan.key() + ": " + message);
                }
                if (message.startsWith("NOREPLICAS")) {
                    throw new NotSyncedException(plan.key() + ": " + message + " (nothing was written)");
                }
                throw e;
            }
            String unsynced = masters.read(checks, replies.subList(touch == null ? 1 : 2, replies.size()), master);
            return new Sent(reply, unsynced);
        }
    }

    /**
     * The {@code BLOCK} a resend carries: without limit stays so, a timed wait gets what is left of
     * it, and one whose time is up becomes a single try (which still replays a grant).
     */
    static long remainingBlock(long blockMs, long startedNanos) {
        if (blockMs == Plan.NO_BLOCK || blockMs == 0) {
            return blockMs;
        }
        long left = blockMs - TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - startedNanos);
        return left > 0 ? left : Plan.NO_BLOCK;
    }

    /**
     * The release with its request id and, in the same round trip (pipelined), one {@code DEL} of
     * the latches whose replies came: the acquisitions' since the last release, and the unlock
     * latches of the owner's releases before it. The release's own latch is never in it: it is
     * left to the next release's {@code DEL} (or to expire), so that a resend after a lost reply
     * is answered from it with what the first send replied, whether it released or found nothing
     * held (a hold gone before the release, its lease run out or its key deleted, is not held).
     * The {@code DEL}'s reply is not looked at: latches it missed expire on their own. The caller
     * keeps the release's latch ({@code request}'s) for the next release.
     */
    Boolean release(String owner, long leaseMs, String request, List<String> latches) {
        List<List<String>> commands = new ArrayList<>();
        commands.add(plan.release(owner, leaseMs, request));
        if (request != null && !latches.isEmpty()) {
            List<String> del = new ArrayList<>();
            del.add("DEL");
            del.addAll(latches);
            commands.add(del);
        }
        Link link = client.connector().open(plan.key());
        try {
            List<Object> replies;
            try {
                replies = pipelineFollowing(link, commands);
            } catch (JedisConnectionException e) {
                if (request == null) {
                    throw e;
                }
                // Once more with the same id: if the first one was applied, the server replies
                // what it replied then (the latch), and releases nothing twice.
                link.close();
                link = null; // closed: if opening another fails, the finally has nothing to close
                link = client.connector().open(plan.key());
                replies = pipelineFollowing(link, commands);
            }
            if (replies.get(0) instanceof JedisDataException e) {
                throw e;
            }
            return plan.released(replies.get(0));
        } finally {
            if (link != null) {
                link.close();
            }
        }
    }

    /** {@code link.pipeline(commands)}, sent again where a MOVED first reply sends it. */
    private static List<Object> pipelineFollowing(Link link, List<List<String>> commands) {
        while (true) {
            List<Object> replies = link.pipeline(commands, Link.DEFAULT, null);
            if (!(replies.get(0) instanceof JedisMovedDataException moved && link.follow(moved))) {
                return replies;
            }
        }
    }
}
