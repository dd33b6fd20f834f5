package io.github.rwlock.client;

/**
 * How a lock object takes its holds. Immutable: each {@code with…} returns a copy.
 *
 * <pre>{@code
 * PlainLock lock = new PlainLock(client, "invoice:42", LockOptions.defaults().withFenced(true));
 * }</pre>
 */
public final class LockOptions {
    private static final LockOptions DEFAULTS = new LockOptions(false, true, false, null);

    private final boolean fenced;
    private final boolean reentrant;
    private final boolean session;
    private final LockLostListener onLost;

    private LockOptions(boolean fenced, boolean reentrant, boolean session, LockLostListener onLost) {
        this.fenced = fenced;
        this.reentrant = reentrant;
        this.session = session;
        this.onLost = onLost;
    }

    /**
     * Not fenced, re-entrant, no session, no listener.
     *
     * @return the defaults
     */
    public static LockOptions defaults() {
        return DEFAULTS;
    }

    /**
     * Fenced ({@code FENCED}, Redisson's RFencedLock): every acquisition takes the next fencing
     * token, read with {@link DistributedLock#getToken()}. A {@link PlainLock} or a read-write lock's
     * write side.
     *
     * @param fenced whether to take tokens
     * @return a copy with it
     */
    public LockOptions withFenced(boolean fenced) {
        return new LockOptions(fenced, reentrant, session, onLost);
    }

    /**
     * Re-entrant (the default) or not ({@code NOREENTRY}, Redisson's non-reentrant lock: the
     * holder taking it again gets {@link NotReentrantException}). A {@link PlainLock} only.
     *
     * @param reentrant whether the holder may take it again
     * @return a copy with it
     */
    public LockOptions withReentrant(boolean reentrant) {
        return new LockOptions(fenced, reentrant, session, onLost);
    }

    /**
     * Session holds ({@code SESSION}): each hold is bound to the connection that took it, kept out
     * of the pool for the hold's life; the server keeps it alive (no watchdog) and frees it when
     * that connection closes.
     *
     * @param session whether to take session holds
     * @return a copy with it
     */
    public LockOptions withSession(boolean session) {
        return new LockOptions(fenced, reentrant, session, onLost);
    }

    /**
     * Called when the watchdog finds a hold gone.
     *
     * @param onLost the listener, or {@code null} for none
     * @return a copy with it
     */
    public LockOptions withOnLost(LockLostListener onLost) {
        return new LockOptions(fenced, reentrant, session, onLost);
    }

    /**
     * Whether acquisitions take fencing tokens.
     *
     * @return the setting
     */
    public boolean fenced() {
        return fenced;
    }

    /**
     * Whether the holder may take the lock again.
     *
     * @return the setting
     */
    public boolean reentrant() {
        return reentrant;
    }

    /**
     * Whether holds are session holds.
     *
     * @return the setting
     */
    public boolean session() {
        return session;
    }

    /**
     * The loss listener.
     *
     * @return the listener, or {@code null}
     */
    public LockLostListener onLost() {
        return onLost;
    }
}
