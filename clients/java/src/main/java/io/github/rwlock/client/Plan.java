package io.github.rwlock.client;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;

/**
 * What one kind of lock sends and how its replies read: a single hold ({@code LOCK.*} or {@code
 * RWLOCK.*} in one mode) or several ({@code LOCK.*ALL}). No I/O here.
 */
final class Plan {
    /**
     * How long the server remembers a release's or an acquisition's reply under its request id
     * (Redisson's 13.5 s): longer than the one retry that resends it.
     */
    static final long LATCH_TTL_MS = 13_500;


    /** {@code blockMs} meaning "send no BLOCK": one try. */
    static final long NO_BLOCK = -1;

    /** Every hold; one for a single lock. */
    final List<Hold> holds;
    /** Whether this is a multi-lock ({@code LOCK.*ALL}). */
    final boolean multi;
    /** Whether acquisitions send {@code FENCED}. */
    final boolean fenced;
    /** Whether acquisitions send {@code NOREENTRY}. */
    final boolean noReentry;
    /** Whether this is the fair lock ({@code FAIRLOCK.*}, one plain hold). */
    final boolean fair;

    private Plan(List<Hold> holds, boolean multi, boolean fenced, boolean noReentry, boolean fair) {
        this.holds = List.copyOf(holds);
        this.multi = multi;
        this.fenced = fenced;
        this.noReentry = noReentry;
        this.fair = fair;
    }

    /** One hold of one lock name. */
    static Plan single(Hold hold, boolean fenced, boolean reentrant) {
        return new Plan(List.of(hold), false, fenced, !reentrant, false);
    }

    /** The fair lock {@code name}: one line of waiters shared with Redisson's RFairLock. */
    static Plan fair(String name, boolean reentrant) {
        return new Plan(List.of(Hold.lock(name)), false, false, !reentrant, true);
    }

    /**
     * Whether an acquisition and a release are resent once after a lost reply: every single lock,
     * the fair one too, whose calls carry {@code HELD n} (the multi-lock's {@code LOCK.*ALL} take
     * none: their lost replies are raised).
     */
    boolean resendable() {
        return !multi;
    }

    /** Several holds, taken together. */
    static Plan multi(List<Hold> holds) {
        if (holds.isEmpty()) {
            throw new IllegalArgumentException("a MultiLock needs at least one hold");
        }
        return new Plan(holds, true, false, false, false);
    }

    /** The key that routes every command (a multi-lock's names must share its slot). */
    String key() {
        return holds.get(0).name();
    }

    private String family() {
        if (fair) {
            return "FAIRLOCK";
        }
        return holds.get(0).kind() == HoldKind.LOCK ? "LOCK" : "RWLOCK";
    }

    private void addHolds(List<String> args) {
        args.add("HOLDS");
        args.add(Integer.toString(holds.size()));
        for (Hold hold : holds) {
            args.add(hold.kind().name());
            args.add(hold.name());
        }
    }

    /**
     * {@code … lease [BLOCK ms] [SESSION] [FENCED] [NOREENTRY] [HELD n]}. The fair lock's one try
     * ({@code blockMs} {@link #NO_BLOCK}) sends {@code NOQUEUE}: without it the caller would join
     * the line and stay there until its deadline passed. {@code held}: the owner's count of this
     * hold before the call ({@link HoldCounts}), so that the server replays a resend whose first
     * send was granted (the count is then {@code held + 1}) instead of granting it twice; {@code
     * null} sends none.
     */
    List<String> acquire(String owner, long leaseMs, long blockMs, boolean session, Integer held) {
        List<String> args = new ArrayList<>();
        if (multi) {
            args.add("LOCK.ACQUIREALL");
        } else {
            Hold hold = holds.get(0);
            args.add(fair ? "FAIRLOCK.ACQUIRE"
                    : hold.kind() == HoldKind.LOCK ? "LOCK.ACQUIRE" : "RWLOCK." + hold.kind().name());
            args.add(hold.name());
        }
        args.add(owner);
        args.add(Long.toString(leaseMs));
        if (fair && blockMs > 0) {
            // Redisson's tryLock(wait) sends its wait as the thread wait time; without limit the
            // server's rwlock.fair-wait (Redisson's 5 minutes) applies.
            args.add("WAIT");
            args.add(Long.toString(blockMs));
        }
        addBlock(args, blockMs);
        if (blockMs == NO_BLOCK && fair) {
            args.add("NOQUEUE");
        }
        if (session) {
            args.add("SESSION");
        }
        if (fenced) {
            args.add("FENCED");
        }
        if (noReentry) {
            args.add("NOREENTRY");
        }
        addHeld(args, held);
        if (multi) {
            addHolds(args);
        }
        return args;
    }

    private static void addHeld(List<String> args, Integer held) {
        if (held != null) {
            args.add("HELD");
            args.add(Integer.toString(held));
        }
    }

    /** Adds {@code BLOCK blockMs} to a command, unless {@code blockMs} is {@link #NO_BLOCK}. */
    static void addBlock(List<String> args, long blockMs) {
        if (blockMs != NO_BLOCK) {
            args.add("BLOCK");
            args.add(Long.toString(blockMs));
        }
    }

    /**
     * How long the server keeps an acquisition's reply: the release's 13.5 s plus the wait. A
     * parked call's latch is stored when it is served (at the earliest when it was sent), and its
     * lost reply is noticed at the latest the wait plus the read margin after the send, so the
     * resend still finds it. {@code BLOCK 0}'s lost reply shows only as a connection error.
     */
    static long acquisitionLatchTtl(long blockMs) {
        return LATCH_TTL_MS + Math.max(0, blockMs);
    }

    /**
     * The key where the server keeps the reply of a semaphore's acquisition of {@code name} for
     * {@code requestId}.
     */
    static String acquisitionLatch(String name, String requestId) {
        return derived("redisson_lock_request_latch", name, requestId);
    }

    /**
     * Pipelined after a semaphore's acquisition resent with {@code requestId} ({@code blockMs}: its
     * wait): the latch's expiry set again, a write for the replica check's {@code WAIT} to cover
     * (a replay from the latch writes nothing on the new connection).
     */
    static List<String> touchAcquisitionLatch(String name, String requestId, long blockMs) {
        return List.of("PEXPIRE", acquisitionLatch(name, requestId), Long.toString(acquisitionLatchTtl(blockMs)));
    }

    /** {@code prefix:{name}:id}, or {@code prefix:name:id} when the name has a hash tag already. */
    private static String derived(String prefix, String name, String requestId) {
        return name.indexOf('{') >= 0
                ? prefix + ":" + name + ":" + requestId
                : prefix + ":{" + name + "}:" + requestId;
    }

    /**
     * The fair lock's {@code FAIRLOCK.CANCEL}: the owner leaves the line, those behind it moving up
     * by the {@code WAIT} its acquisition sent (none for a wait without limit: the server's
     * default, as the acquisition had).
     */
    List<String> cancel(String owner, long blockMs) {
        List<String> args = new ArrayList<>(List.of("FAIRLOCK.CANCEL", key(), owner));
        if (blockMs > 0) {
            args.add("WAIT");
            args.add(Long.toString(blockMs));
        }
        return args;
    }

    /** An acquisition's reply: taken (with its token when fenced), or the PTTL in the way. */
    record Outcome(boolean acquired, long pttl, Long token) {}

    Outcome outcome(Object reply) {
        if (reply == null) {
            return new Outcome(true, -1, null);
        }
        if (reply instanceof List<?> pair && pair.size() == 2) {
            long first = integer(pair.get(0));
            long token = integer(pair.get(1));
            return token == -1 ? new Outcome(false, first, null) : new Outcome(true, -1, token);
        }
        return new Outcome(false, integer(reply), null);
    }

    /**
     * A release. {@code leaseMs}: what a hold still held after it (a re-entered one) lasts again,
     * as Redisson's unlock re-arms it. {@code held}: the owner's count of this hold before it
     * ({@link HoldCounts}), so that the server answers a resend whose first send released (the
     * count is then {@code held - 1}) with 0 and releases nothing twice; a last release ({@code
     * held} 1) cannot be told from one of a hold gone before it, so the server never replays it
     * and it is sent without {@code HELD} (two arguments fewer per cycle); {@code null} sends none
     * (the multi-lock never sends one).
     */
    List<String> release(String owner, long leaseMs, Integer held) {
        List<String> args = new ArrayList<>();
        if (multi) {
            args.add("LOCK.UNLOCKALL");
            args.add(owner);
            addHolds(args);
            return args;
        }
        Hold hold = holds.get(0);
        args.add(family() + ".UNLOCK");
        args.add(hold.name());
        args.add(owner);
        if (hold.kind() != HoldKind.LOCK) {
            args.add(hold.kind().name());
        }
        args.add("LEASE");
        args.add(Long.toString(leaseMs));
        if (held == null || held != 1) {
            addHeld(args, held);
        }
        return args;
    }

    /**
     * The key where the server keeps the reply of a semaphore's release of {@code name} for {@code
     * requestId}, as Redisson names it.
     */
    static String unlockLatch(String name, String requestId) {
        return derived("redisson_unlock_latch", name, requestId);
    }

    /**
     * Whether the owner held what it released: {@code null} when it held nothing (a multi-lock:
     * some hold was not its own, the others were released), {@code TRUE} when released, {@code
     * FALSE} when still held (re-entered).
     */
    Boolean released(Object reply) {
        if (multi) {
            boolean all = true;
            for (Object item : list(reply)) {
                if (item == null) {
                    return null;
                }
                all &= integer(item) == 1;
            }
            return all;
        }
        return reply == null ? null : integer(reply) == 1;
    }

    /** The watchdog's call. */
    List<String> renew(String owner, long leaseMs) {
        List<String> args = new ArrayList<>();
        if (multi) {
            args.add("LOCK.RENEWALL");
            args.add(owner);
            args.add(Long.toString(leaseMs));
            addHolds(args);
            return args;
        }
        // LOCK.RENEW renews a fair hold too: both are the same hash (design §13.1).
        args.add((fair ? "LOCK" : family()) + ".RENEW");
        args.add(key());
        args.add(owner);
        args.add(Long.toString(leaseMs));
        return args;
    }

    /** True while every hold is still the owner's. */
    boolean renewed(Object reply) {
        if (multi) {
            for (Object item : list(reply)) {
                if (item == null || integer(item) != 1) {
                    return false;
                }
            }
            return true;
        }
        return integer(reply) == 1;
    }

    // -- replies --------------------------------------------------------------------------------

    /** An integer reply (or a bulk string of one). */
    static long integer(Object reply) {
        if (reply instanceof Long value) {
            return value;
        }
        if (reply instanceof byte[] || reply instanceof String) {
            return Long.parseLong(text(reply).trim());
        }
        throw new IllegalStateException("expected an integer reply, got " + describe(reply));
    }

    /** An array reply. */
    static List<?> list(Object reply) {
        if (reply instanceof List<?> items) {
            return items;
        }
        throw new IllegalStateException("expected an array reply, got " + describe(reply));
    }

    /** A bulk or status string reply as text. */
    static String text(Object reply) {
        if (reply instanceof byte[] bytes) {
            return new String(bytes, StandardCharsets.UTF_8);
        }
        return String.valueOf(reply);
    }

    private static String describe(Object reply) {
        return reply == null ? "nil" : reply.getClass().getSimpleName() + " " + text(reply);
    }

    /** The {@code field:value} lines of an INFO reply. */
    static Map<String, String> info(Object reply) {
        Map<String, String> fields = new HashMap<>();
        for (String line : text(reply).split("\r?\n")) {
            int colon = line.indexOf(':');
            if (colon > 0 && !line.startsWith("#")) {
                fields.put(line.substring(0, colon).trim(), line.substring(colon + 1).trim());
            }
        }
        return fields;
    }
}
