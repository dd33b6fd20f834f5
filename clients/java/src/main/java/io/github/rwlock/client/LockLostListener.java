package io.github.rwlock.client;

/**
 * Told when the watchdog finds a hold gone: a renewal replied that the owner no longer holds the
 * lock (its lease ran out, or it was forced open or deleted), or no renewal succeeded for a whole
 * lease. Called once per loss, from the watchdog's thread: return quickly.
 */
@FunctionalInterface
public interface LockLostListener {
    /**
     * A hold was lost.
     *
     * @param name the lock's name (a multi-lock: its first name)
     * @param owner the owner that held it, {@code <client UUID>:<thread id>}
     */
    void lockLost(String name, String owner);
}
