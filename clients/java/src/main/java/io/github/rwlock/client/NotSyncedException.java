package io.github.rwlock.client;

/**
 * The acquisition reached the master but not all of its replicas (or its AOF) within the sync
 * timeout (error kind {@code NotSynced}); the hold was released again, as Redisson's {@code
 * checkLockSyncedSlaves} does. See {@link ReplicaSync}.
 */
public class NotSyncedException extends LockException {
    private static final long serialVersionUID = 1L;

    /**
     * The replicas did not acknowledge the hold in time.
     *
     * @param message the lock, the command and its reply
     */
    public NotSyncedException(String message) {
        super(message);
    }
}
