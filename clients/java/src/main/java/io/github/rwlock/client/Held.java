package io.github.rwlock.client;

/**
 * A hold taken by {@link DistributedLock#hold}, released by {@link #close()}: for
 * try-with-resources.
 *
 * <pre>{@code
 * try (Held held = lock.hold(Duration.ofSeconds(5), null)) {
 *     storage.write(data, held.token());
 * }
 * }</pre>
 */
public final class Held implements AutoCloseable {
    private final Long token;
    private final Runnable release;
    private boolean closed;

    Held(Long token, Runnable release) {
        this.token = token;
        this.release = release;
    }

    /**
     * The fencing token this acquisition took.
     *
     * @return the token, or {@code null} when the lock is not fenced
     */
    public Long token() {
        return token;
    }

    /**
     * Releases the hold (once; later calls do nothing).
     *
     * @throws NotHeldException when the hold was lost meanwhile
     * @throws ReleaseUnknownException when the last release's reply was lost and its resend found
     *     nothing held (see {@link DistributedLock#unlock()})
     */
    @Override
    public void close() {
        if (closed) {
            return;
        }
        closed = true;
        release.run();
    }
}
