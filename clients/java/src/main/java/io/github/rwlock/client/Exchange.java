package io.github.rwlock.client;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.TimeUnit;
import java.util.function.LongFunction;
import redis.clients.jedis.exceptions.JedisConnectionException;
import redis.clients.jedis.exceptions.JedisDataException;
import redis.clients.jedis.exceptions.JedisMovedDataException;

/**
 * One key's round trips with the server (a lock's, a semaphore's, a latch's), apart from what this
 * process knows of its holds: an acquisition with its replica checks in one pipeline and its one
 * resend after a lost reply, a release (with a semaphore's latches' {@code DEL}) and its one
 * resend, a wait that only reads, and {@code MOVED} followed.
 */
final class Exchange {
    /** Added to a blocking call's wait for its reply to arrive. */
    static final long REPLY_MARGIN_MS = 5_000;

    private final Client client;
    private final String key;

    Exchange(Client client, String key) {
        this.client = client;
        this.key = key;
    }

    /** One kind's acquisition, as {@link #acquire} sends it. */
    interface Acquisition {
        /**
         * The command, with {@code BLOCK blockMs} ({@link Plan#NO_BLOCK}: none), the same on the
         * first send and the resend but for the wait: what makes the resend idempotent ({@code
         * HELD n}, or a semaphore's {@code REQUEST id ttl}) is in it.
         */
        List<String> command(long blockMs);

        /** Whether a reply granted it. */
        boolean granted(Object reply);

        /** What gives back the grant {@code reply} when the replicas did not acknowledge it. */
        List<String> undo(Object reply);

        /** Sent on the new link before a resend after a lost reply; nothing by default. */
        default void beforeResend(Link link) {}

        /**
         * Pipelined after the resend ({@code blockMs}: its wait), before the replica check, or
         * {@code null} (the default): a write for the check's {@code WAIT} to cover when a replay
         * of the server writes nothing itself (a semaphore's latch: its expiry set again).
         */
        default List<String> touch(long blockMs) {
            return null;
        }
    }

    /** An acquisition's reply, and the link it came on: the caller's to close (or keep). */
    record Acquired(Object reply, Link link) {}

    /**
     * An acquisition in one round trip ({@link #send}). When its reply is lost (the connection
     * broke, or the read timed out: Jedis's {@link JedisConnectionException}) and it is {@code
     * resendable}, it is sent once more on a new connection, the same command with, with {@code
     * BLOCK}, the wait that remains: a lock's {@code HELD n} (the owner's count before it) or a
     * semaphore's request id makes the server reply to a granted first send as it did then and
     * change nothing, so it counts once. A lock's replay replicates a no-op write of its own, so
     * the replica check's {@code WAIT} on the new connection covers the grant the first send
     * wrote; a semaphore's {@link Acquisition#touch} does it. A grant the replicas did not
     * acknowledge is given back on the same connection ({@link Acquisition#undo}) and throws
     * {@link NotSyncedException}: not held on a master that could lose it.
     *
     * @param given the link to send on (a session's own: never resent, since every hold of that
     *     session went with it), or {@code null} to open one of the key's
     * @param resendable resent once after a lost reply (with {@code given} never)
     * @return the reply and its link ({@code given} when given)
     */
    Acquired acquire(Acquisition what, Link given, boolean resendable, long blockMs, boolean interruptible)
            throws Waiter.Cancelled {
        long started = System.nanoTime();
        Link link = given != null ? given : client.connector().open(key);
        boolean handed = false;
        try {
            Sent sent;
            try {
                sent = send(link, what.command(blockMs), null, blockMs, interruptible);
            } catch (JedisConnectionException lost) {
                if (!resendable || given != null) {
                    throw lost;
                }
                link.close();
                link = null; // closed: if opening another fails, the finally has nothing to close
                link = client.connector().open(key);
                what.beforeResend(link);
                long again = remainingBlock(blockMs, started);
                sent = send(link, what.command(again), what.touch(again), again, interruptible);
            }
            if (sent.unsynced() != null && what.granted(sent.reply())) {
                link.call(what.undo(sent.reply()), Link.DEFAULT);
                throw new NotSyncedException(key + ": " + sent.unsynced() + " within "
                        + client.getReplicaSync().timeout().toMillis() + " ms; given back again");
            }
            handed = true;
            return new Acquired(sent.reply(), link);
        } finally {
            if (!handed && link != null && link != given) {
                link.close();
            }
        }
    }

    /** An acquisition's reply, and what its replica check found short (null: acknowledged). */
    private record Sent(Object reply, String unsynced) {}

    /**
     * One acquisition in one round trip: the command, after a resend its {@code touch}, then what
     * the replica check sends for its master ({@link Masters}: {@code WAIT}, {@code WAITAOF},
     * now and then {@code INFO}), pipelined on the link and read within the wait, the checks'
     * timeouts and a margin. The master's INFO is asked first, in a round trip of its own, only
     * when nothing is known of it yet.
     */
    private Sent send(Link link, List<String> args, List<String> touch, long blockMs, boolean interruptible)
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
            List<Object> replies = waitFor(link, commands, blockMs, checks.extraMs(), interruptible);
            Object reply = replies.get(0);
            if (reply instanceof JedisMovedDataException moved && link.follow(moved)) {
                continue;
            }
            if (reply instanceof JedisDataException e) {
                String message = String.valueOf(e.getMessage());
                if (message.startsWith("NON_REENTRANT")) {
                    throw new NotReentrantException(key + ": " + message);
                }
                if (message.startsWith("NOREPLICAS")) {
                    throw new NotSyncedException(key + ": " + message + " (nothing was written)");
                }
                throw e;
            }
            String unsynced = masters.read(checks, replies.subList(touch == null ? 1 : 2, replies.size()), master);
            return new Sent(reply, unsynced);
        }
    }

    /**
     * {@code commands} pipelined on {@code link}, the first with {@code BLOCK blockMs} ({@link
     * Plan#NO_BLOCK}: none; 0: without limit), read within the wait, {@code extraMs} for what
     * follows it and a margin; on one of the client's wait threads when {@code interruptible}, so
     * that an interrupt ends the wait on the server ({@link Waiter}).
     */
    private List<Object> waitFor(Link link, List<List<String>> commands, long blockMs, long extraMs,
            boolean interruptible) throws Waiter.Cancelled {
        long timeout = blockMs == Plan.NO_BLOCK ? (extraMs == 0 ? Link.DEFAULT : extraMs + REPLY_MARGIN_MS)
                : blockMs == 0 ? 0 : blockMs + extraMs + REPLY_MARGIN_MS;
        return interruptible && blockMs != Plan.NO_BLOCK
                ? Waiter.call(client.waiters(), client.connector(), link, commands, timeout)
                : link.pipeline(commands, timeout, null);
    }

    /**
     * After an interrupt ended the wait of a semaphore's {@code what}, sent with {@code request}:
     * the grant the server made at that moment (its reply), or {@code null} when it granted
     * nothing. When no reply came, the acquisition's latch says whether it was granted (the server
     * stores it when it serves the waiter, and the kill ended the wait before it replied); a resend
     * with the same id and no wait then replays that grant, taking nothing, so the caller learns
     * what to give back.
     *
     * @throws RuntimeException the server could not be asked
     */
    Object grantedDespiteInterrupt(Acquisition what, String request, Waiter.Cancelled cancelled) {
        Object reply;
        if (cancelled.replied) {
            reply = cancelled.reply;
        } else if (Plan.integer(call(List.of("EXISTS", Plan.acquisitionLatch(key, request)))) == 1) {
            reply = call(what.command(Plan.NO_BLOCK));
        } else {
            return null;
        }
        return reply instanceof JedisDataException || !what.granted(reply) ? null : reply;
    }

    /**
     * A wait that takes nothing (the latch's {@code AWAIT}): {@code command.apply(blockMs)} on a
     * connection of the key, read as {@link #waitFor} reads it. It changes nothing on the server,
     * so after a lost reply it is simply sent once more, with what is left of the wait.
     */
    Object await(LongFunction<List<String>> command, long blockMs, boolean interruptible) throws Waiter.Cancelled {
        long started = System.nanoTime();
        try {
            return awaitOnce(command.apply(blockMs), blockMs, interruptible);
        } catch (JedisConnectionException lost) {
            long again = remainingBlock(blockMs, started);
            return awaitOnce(command.apply(again), again, interruptible);
        }
    }

    private Object awaitOnce(List<String> args, long blockMs, boolean interruptible) throws Waiter.Cancelled {
        Link link = client.connector().open(key);
        try {
            while (true) {
                Object reply = waitFor(link, List.of(args), blockMs, 0, interruptible).get(0);
                if (reply instanceof JedisMovedDataException moved && link.follow(moved)) {
                    continue;
                }
                if (reply instanceof JedisDataException e) {
                    throw e;
                }
                return reply;
            }
        } finally {
            link.close();
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

    /** A release's reply, and whether it answered a resend after the first send's reply was lost. */
    record Released(Object reply, boolean resent) {}

    /**
     * The release {@code command} and, in the same round trip (pipelined), one {@code DEL} of a
     * semaphore's {@code latches} whose replies came (a lock's release has none: it is one
     * command). The {@code DEL}'s reply is not looked at: latches it missed expire on their own.
     *
     * @param resendable the command is idempotent (a lock's {@code HELD n}, a semaphore's request
     *     id): after a connection error it is sent once more, the same, and the server releases
     *     nothing twice; the caller reads the resend's reply knowing that the first send may have
     *     been applied
     * @return the release's reply (an error reply thrown)
     */
    Released release(List<String> command, boolean resendable, List<String> latches) {
        List<List<String>> commands = new ArrayList<>();
        commands.add(command);
        if (!latches.isEmpty()) {
            List<String> del = new ArrayList<>();
            del.add("DEL");
            del.addAll(latches);
            commands.add(del);
        }
        Link link = client.connector().open(key);
        try {
            List<Object> replies;
            boolean resent = false;
            try {
                replies = pipelineFollowing(link, commands);
            } catch (JedisConnectionException e) {
                if (!resendable) {
                    throw e;
                }
                link.close();
                link = null; // closed: if opening another fails, the finally has nothing to close
                link = client.connector().open(key);
                resent = true;
                replies = pipelineFollowing(link, commands);
            }
            if (replies.get(0) instanceof JedisDataException e) {
                throw e;
            }
            return new Released(replies.get(0), resent);
        } finally {
            if (link != null) {
                link.close();
            }
        }
    }

    /** One command on a connection of the key, its error reply thrown (introspection, counts). */
    Object call(List<String> args) {
        Link link = client.connector().open(key);
        try {
            return link.call(args, Link.DEFAULT);
        } finally {
            link.close();
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
