package io.github.rwlock.client;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import redis.clients.jedis.exceptions.JedisDataException;

/**
 * What a {@link Client} learned of the masters it acquired on, by address: how many replicas
 * it expects there (the most it ever saw: {@code INFO} may only raise it, since a paused or
 * demoted master says 0), whether the master writes an AOF, whether it has {@code WAITAOF}; and
 * what an acquisition's pipeline carries after the acquisition for one of them.
 */
final class Masters {
    /** How often a master's INFO is asked again, inside an acquisition's pipeline. */
    static final long REFRESH_NANOS = TimeUnit.SECONDS.toNanos(5);

    static final List<String> INFO = List.of("INFO", "replication", "persistence");

    /** One master's learned state. Guarded by itself. */
    private static final class Learned {
        int replicas;
        boolean aof;
        boolean waitAof = true;
        /** When INFO was last asked (sent), by {@link System#nanoTime()}. */
        long asked;
    }

    private final Map<String, Learned> learned = new ConcurrentHashMap<>();

    /**
     * What follows an acquisition on one master.
     *
     * @param replicas {@code WAIT <replicas>} when more than 0
     * @param waitAof {@code WAITAOF 1 0}
     * @param aofRequired the fsync is required ({@link ReplicaSync.Aof#REQUIRED})
     * @param unmet why it cannot be acknowledged whatever the replies, or null
     * @param info {@code INFO replication persistence}, last
     * @param timeoutMs each wait's timeout
     */
    record Checks(int replicas, boolean waitAof, boolean aofRequired, String unmet, boolean info, long timeoutMs) {
        static final Checks NONE = new Checks(0, false, false, null, false, 1);

        /** The commands after the acquisition, in this order. */
        List<List<String>> commands() {
            List<List<String>> commands = new ArrayList<>();
            String timeout = Long.toString(timeoutMs);
            if (replicas > 0) {
                commands.add(List.of("WAIT", Integer.toString(replicas), timeout));
            }
            if (waitAof) {
                commands.add(List.of("WAITAOF", "1", "0", timeout));
            }
            if (info) {
                commands.add(INFO);
            }
            return commands;
        }

        /** How much longer than the acquisition's its replies may take. */
        long extraMs() {
            return timeoutMs * ((replicas > 0 ? 1 : 0) + (waitAof ? 1 : 0));
        }
    }

    /**
     * The checks for the next acquisition on {@code master}, or null when the policy needs what
     * nobody asked it yet: ask {@link #INFO}, {@link #learn} it, and plan again. An INFO due again
     * is marked asked now, and rides in this acquisition's pipeline.
     */
    Checks plan(String master, ReplicaSync sync, long nowNanos) {
        if (!sync.enabled()) {
            return Checks.NONE;
        }
        boolean needsInfo = sync.replicas() == ReplicaSync.AUTO || sync.aof() == ReplicaSync.Aof.AUTO;
        Learned known = learned.get(master);
        if (known == null && needsInfo) {
            return null;
        }
        int expected;
        boolean aof;
        boolean waitAof;
        boolean info = false;
        if (known == null) {
            expected = 0;
            aof = false;
            waitAof = true; // unknown until refused
        } else {
            synchronized (known) {
                if (needsInfo && nowNanos - known.asked >= REFRESH_NANOS) {
                    known.asked = nowNanos;
                    info = true;
                }
                expected = known.replicas;
                aof = known.aof;
                waitAof = known.waitAof;
            }
        }
        int replicas = sync.replicas() == ReplicaSync.AUTO ? expected : sync.replicas();
        String unmet = null;
        boolean sendAof;
        switch (sync.aof()) {
            case OFF -> sendAof = false;
            case AUTO -> sendAof = aof && waitAof;
            default -> {
                sendAof = waitAof;
                if (!waitAof) {
                    unmet = "the AOF is required and the master has no WAITAOF";
                }
            }
        }
        return new Checks(replicas, sendAof, sync.aof() == ReplicaSync.Aof.REQUIRED, unmet, info,
                Math.max(1, sync.timeout().toMillis()));
    }

    /** Takes in {@code master}'s INFO reply: its replicas only ever rise. */
    void learn(String master, Object infoReply, long askedNanos) {
        Map<String, String> info = Plan.info(infoReply);
        int replicas;
        try {
            replicas = Integer.parseInt(info.getOrDefault("connected_slaves", "0"));
        } catch (NumberFormatException e) {
            replicas = 0;
        }
        Learned known = learned.computeIfAbsent(master, m -> {
            Learned fresh = new Learned();
            fresh.asked = askedNanos;
            return fresh;
        });
        synchronized (known) {
            known.replicas = Math.max(known.replicas, replicas);
            known.aof = "1".equals(info.get("aof_enabled"));
        }
    }

    /** The replicas expected of {@code master} by {@link ReplicaSync#AUTO} (for tests). */
    int expected(String master) {
        Learned known = learned.get(master);
        if (known == null) {
            return 0;
        }
        synchronized (known) {
            return known.replicas;
        }
    }

    /**
     * Reads the replies of {@link Checks#commands()} (an error reply as its {@link
     * JedisDataException}), learning what they say of {@code master} whether or not the
     * acquisition was granted. Null when everything expected acknowledged it, else what fell
     * short (the caller ignores it when the acquisition was refused).
     */
    String read(Checks checks, List<Object> replies, String master) {
        String verdict = checks.unmet();
        int at = 0;
        if (checks.replicas() > 0) {
            Object reply = replies.get(at++);
            if (reply instanceof JedisDataException e) {
                throw e;
            }
            long acknowledged = Plan.integer(reply);
            if (acknowledged < checks.replicas() && verdict == null) {
                verdict = "WAIT " + checks.replicas() + " replied " + acknowledged;
            }
        }
        if (checks.waitAof()) {
            Object reply = replies.get(at++);
            if (reply instanceof JedisDataException e) {
                String message = String.valueOf(e.getMessage());
                boolean unknown = message.toLowerCase(Locale.ROOT).contains("unknown command");
                if (unknown) {
                    Learned known = learned.get(master);
                    if (known != null) {
                        synchronized (known) {
                            known.waitAof = false;
                        }
                    }
                }
                // Unknown (before Redis 7.2): WAIT alone, unless the AOF is required. Any other
                // refusal (the AOF turned off since) leaves the fsync unconfirmed.
                if ((!unknown || checks.aofRequired()) && verdict == null) {
                    verdict = "WAITAOF: " + message;
                }
            } else {
                List<?> counts = Plan.list(reply);
                if (Plan.integer(counts.get(0)) < 1 && verdict == null) {
                    verdict = "WAITAOF 1 0 replied " + counts;
                }
            }
        }
        if (checks.info()) {
            Object reply = replies.get(at);
            if (!(reply instanceof JedisDataException)) {
                learn(master, reply, System.nanoTime());
            }
        }
        return verdict;
    }
}
