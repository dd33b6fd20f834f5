package io.github.rwlock.client;

import java.util.List;

/**
 * Redisson's {@code RLock} on the module's {@code LOCK.*} commands: one owner at a time,
 * re-entrant; fenced ({@code RFencedLock}) or non-reentrant by its {@link LockOptions}. A
 * Redisson service and this client share the same lock under the same name.
 *
 * <pre>{@code
 * PlainLock lock = new PlainLock(client, "invoice:42");
 * if (lock.tryLock(5, TimeUnit.SECONDS)) {
 *     try {
 *         ...
 *     } finally {
 *         lock.unlock();
 *     }
 * }
 * }</pre>
 */
public final class PlainLock extends DistributedLock {
    /**
     * The plain, re-entrant lock {@code name}.
     *
     * @param client the client
     * @param name the lock's name (its key)
     */
    public PlainLock(Client client, String name) {
        this(client, name, LockOptions.defaults());
    }

    /**
     * The lock {@code name} with options (fenced, non-reentrant, session, loss listener).
     *
     * @param client the client
     * @param name the lock's name (its key)
     * @param options how it takes its holds
     */
    public PlainLock(Client client, String name, LockOptions options) {
        super(client, Plan.single(Hold.lock(checkName(name)), options.fenced(), options.reentrant()), options);
    }

    /**
     * A fenced lock ({@code RFencedLock}): every acquisition takes the next fencing token.
     *
     * @param client the client
     * @param name the lock's name
     * @return the lock
     */
    public static PlainLock fenced(Client client, String name) {
        return new PlainLock(client, name, LockOptions.defaults().withFenced(true));
    }

    /**
     * A non-reentrant lock: its holder taking it again gets {@link NotReentrantException}.
     *
     * @param client the client
     * @param name the lock's name
     * @return the lock
     */
    public static PlainLock nonReentrant(Client client, String name) {
        return new PlainLock(client, name, LockOptions.defaults().withReentrant(false));
    }

    /**
     * Whether anyone holds the lock now (asks the server).
     *
     * @return whether the lock's key exists
     */
    public boolean isLocked() {
        return exists();
    }

    /**
     * How long the lock's holds have left (asks the server), as Redisson's {@code
     * remainTimeToLive}.
     *
     * @return milliseconds; -2 when nobody holds it
     */
    public long remainTimeToLive() {
        return pttl();
    }

    /**
     * Deletes the lock whoever holds it ({@code LOCK.FORCEUNLOCK}); the holders' watchdogs then
     * report it lost.
     *
     * @return whether there was something to delete
     */
    public boolean forceUnlock() {
        return Plan.integer(command(List.of("LOCK.FORCEUNLOCK", getName()))) == 1;
    }
}
