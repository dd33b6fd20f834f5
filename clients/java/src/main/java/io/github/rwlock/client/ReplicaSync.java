package io.github.rwlock.client;

import java.time.Duration;
import java.util.Objects;

/**
 * After each acquisition, wait for the master's replicas to have it, as Redisson does with {@code
 * checkLockSyncedSlaves} (on by default), in the acquisition's own round trip: the acquisition,
 * then {@code WAIT <expected> <timeout>} when replicas are expected and {@code WAITAOF 1 0
 * <timeout>} when the master's AOF fsync is waited for, pipelined on one connection. When not
 * every copy acknowledged in time, the hold is released and the acquisition throws {@link
 * NotSyncedException}; so it does when the master refuses the write for want of replicas ({@code
 * NOREPLICAS}, its {@code min-replicas-to-write}).
 *
 * <p>How many replicas are expected is never read from the node just written to alone: a master
 * that was paused past its failover and has not been demoted yet says it has none. With {@link
 * #AUTO} the client learns it from {@code INFO replication persistence} (once before the first
 * acquisition on a master, one extra round trip; then at most every 5 s inside an acquisition's
 * pipeline) and keeps the highest number it ever saw for that master: a master saying fewer later
 * does not lower it, so its acquisitions fail instead of being acknowledged by nobody. Lowering
 * it takes a new {@link Client} (or an explicit count).
 *
 * @param enabled off: an acquisition returns as soon as the master has it
 * @param timeout how long to wait for the replicas and the fsync (Redisson's {@code
 *     slavesSyncTimeout}, 1 s)
 * @param replicas how many replicas must acknowledge: {@link #AUTO} (the most the master was ever
 *     seen with), or exactly this many (0: never wait for replicas)
 * @param aof whether the master's AOF fsync is waited for
 */
public record ReplicaSync(boolean enabled, Duration timeout, int replicas, Aof aof) {
    /** {@code replicas}: the most replicas the master was ever seen with by this client. */
    public static final int AUTO = -1;

    /** The default: enabled, 1 s, {@link #AUTO} replicas, {@link Aof#AUTO}. */
    public static final ReplicaSync DEFAULT = new ReplicaSync(true, Duration.ofSeconds(1), AUTO, Aof.AUTO);

    /** No replica acknowledgement. */
    public static final ReplicaSync DISABLED = new ReplicaSync(false, Duration.ofSeconds(1), AUTO, Aof.AUTO);

    /** Whether an acquisition waits for the master's fsync to its append-only file. */
    public enum Aof {
        /**
         * Where the master says it writes one ({@code aof_enabled:1}) and has {@code WAITAOF}
         * (Redis 7.2+); before, {@code WAIT} alone is the check.
         */
        AUTO,
        /**
         * Always: on a master that writes no AOF or has no {@code WAITAOF} every acquisition
         * throws {@link NotSyncedException}.
         */
        REQUIRED,
        /** Never. */
        OFF
    }

    /**
     * Checks the arguments.
     *
     * @param enabled whether to wait at all
     * @param timeout how long to wait, positive
     * @param replicas {@link #AUTO} or a count of 0 or more
     * @param aof whether to wait for the AOF
     */
    public ReplicaSync {
        Objects.requireNonNull(timeout, "timeout");
        Objects.requireNonNull(aof, "aof");
        if (timeout.isNegative() || timeout.isZero()) {
            throw new IllegalArgumentException("the replica sync timeout must be positive: " + timeout);
        }
        if (replicas < AUTO) {
            throw new IllegalArgumentException("replicas must be AUTO or 0 or more: " + replicas);
        }
    }

    /**
     * {@link #AUTO} replicas.
     *
     * @param enabled whether to wait at all
     * @param timeout how long to wait, positive
     * @param aof {@link Aof#AUTO} when true, else {@link Aof#OFF}
     */
    public ReplicaSync(boolean enabled, Duration timeout, boolean aof) {
        this(enabled, timeout, AUTO, aof ? Aof.AUTO : Aof.OFF);
    }

    /**
     * The same with this replica count.
     *
     * @param count {@link #AUTO} or exactly this many (0: never wait for replicas)
     * @return a new policy
     */
    public ReplicaSync withReplicas(int count) {
        return new ReplicaSync(enabled, timeout, count, aof);
    }

    /**
     * The same with this AOF policy.
     *
     * @param policy the AOF policy
     * @return a new policy
     */
    public ReplicaSync withAof(Aof policy) {
        return new ReplicaSync(enabled, timeout, replicas, policy);
    }
}
