package io.github.rwlock.client;

/**
 * The lock was held by others until the wait ran out (error kind {@code NotAcquired}). Raised by
 * {@link DistributedLock#hold}; {@code tryLock} returns {@code false} instead.
 */
public class NotAcquiredException extends LockException {
    private static final long serialVersionUID = 1L;

    /** What the holds in the way had left, in milliseconds; -1 when unknown. */
    private final long pttl;

    /**
     * The wait for {@code name} ran out.
     *
     * @param name the lock's name
     * @param pttl what the holds in the way had left, in milliseconds (-1: unknown)
     */
    public NotAcquiredException(String name, long pttl) {
        super(name + " is held by others (" + pttl + " ms left)");
        this.pttl = pttl;
    }

    /**
     * How long the holds in the way had left when the wait ran out.
     *
     * @return milliseconds, or -1 when unknown
     */
    public long getPttl() {
        return pttl;
    }
}
