package io.github.rwlock.client;

import java.time.Duration;
import java.util.Objects;

/**
 * After each acquisition, wait for the master's replicas to have it, as Redisson does with {@code
 * checkLockSyncedSlaves} (on by default): on the acquisition's connection, {@code INFO
 * replication persistence}, then {@code WAIT <replicas> <timeout>} when the master has replicas
 * and {@code WAITAOF 1 0 <timeout>} when it writes an AOF and has {@code WAITAOF} (Redis 7.2+).
 * When not every copy acknowledged in time, the hold is released and the acquisition throws
 * {@link NotSyncedException}. A master without replicas costs one {@code INFO}.
 *
 * @param enabled off: an acquisition returns as soon as the master has it
 * @param timeout how long to wait for the replicas (Redisson's {@code slavesSyncTimeout}, 1 s)
 * @param aof also wait for the master's AOF fsync where it writes one
 */
public record ReplicaSync(boolean enabled, Duration timeout, boolean aof) {
    /** The default: enabled, 1 s, AOF included. */
    public static final ReplicaSync DEFAULT = new ReplicaSync(true, Duration.ofSeconds(1), true);

    /** No replica acknowledgement. */
    public static final ReplicaSync DISABLED = new ReplicaSync(false, Duration.ofSeconds(1), true);

    /**
     * Checks the timeout.
     *
     * @param enabled whether to wait at all
     * @param timeout how long to wait, positive
     * @param aof whether to wait for the AOF too
     */
    public ReplicaSync {
        Objects.requireNonNull(timeout, "timeout");
        if (timeout.isNegative() || timeout.isZero()) {
            throw new IllegalArgumentException("the replica sync timeout must be positive: " + timeout);
        }
    }
}
