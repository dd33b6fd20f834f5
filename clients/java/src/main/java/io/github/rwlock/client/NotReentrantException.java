package io.github.rwlock.client;

/**
 * A non-reentrant lock taken again by its holder (error kind {@code NotReentrant}): the server
 * replied {@code NON_REENTRANT_REACQUIRE} and nothing changed.
 */
public class NotReentrantException extends LockException {
    private static final long serialVersionUID = 1L;

    /**
     * The holder asked again.
     *
     * @param message the lock and the server's error
     */
    public NotReentrantException(String message) {
        super(message);
    }
}
