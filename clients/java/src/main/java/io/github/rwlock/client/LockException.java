package io.github.rwlock.client;

/**
 * Base of every error this package raises about a lock. Errors of Jedis itself (connection
 * failures, timeouts, error replies it does not understand) pass through as Jedis's own
 * exceptions.
 */
public class LockException extends RuntimeException {
    private static final long serialVersionUID = 1L;

    /**
     * An error with a message.
     *
     * @param message what went wrong, naming the lock
     */
    public LockException(String message) {
        super(message);
    }
}
