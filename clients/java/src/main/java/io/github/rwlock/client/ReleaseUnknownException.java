package io.github.rwlock.client;

/**
 * A last release whose reply was lost, and whose resend found the owner holding nothing (error kind
 * {@code ReleaseUnknown}): the first send freed the lock, or the hold was gone before it (its lease
 * ran out, a failover lost it, its key was deleted), and the server cannot tell which. Either way
 * the owner holds nothing now. Not a {@link NotHeldException}: that would claim the release freed
 * nothing, which may be false.
 */
public class ReleaseUnknownException extends LockException {
    private static final long serialVersionUID = 1L;

    /**
     * A last release that may or may not have freed the lock.
     *
     * @param message the lock and the owner
     */
    public ReleaseUnknownException(String message) {
        super(message);
    }
}
