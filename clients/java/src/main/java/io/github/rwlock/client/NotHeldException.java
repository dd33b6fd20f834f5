package io.github.rwlock.client;

/**
 * A release of a hold the owner does not have (error kind {@code NotHeld}): never taken by this
 * thread, already released, or lost (its lease ran out, or the lock was forced open).
 */
public class NotHeldException extends LockException {
    private static final long serialVersionUID = 1L;

    /**
     * A release that found nothing to release.
     *
     * @param message the lock and the owner
     */
    public NotHeldException(String message) {
        super(message);
    }
}
