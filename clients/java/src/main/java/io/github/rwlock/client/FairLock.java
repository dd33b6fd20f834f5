package io.github.rwlock.client;

import java.util.ArrayList;
import java.util.List;

/**
 * Redisson's {@code RFairLock} on the module's {@code FAIRLOCK.*} commands: one owner at a time,
 * granted in arrival order. Waiters of this client and Redisson's {@code RFairLock} threads on the
 * same name stand in one line (Redisson's {@code redisson_lock_queue:{name}}), each served in its
 * turn (design §13).
 *
 * <p>A wait is one {@code FAIRLOCK.ACQUIRE … BLOCK ms} on the server: the caller joins the line's
 * tail and the server answers when it heads the line and the lock is free, keeping its place from
 * being purged as stale however long it waits. When the wait runs out, or an interrupt ends it, the
 * caller leaves the line (the waiters behind it move up). {@link #tryLock()} never joins the line
 * ({@code NOQUEUE}): it takes the lock only when it is free and nobody waits.
 *
 * <p>Holds are re-entrant (or not, {@link #nonReentrant}), kept by the watchdog ({@code
 * LOCK.RENEW}) or by a lease, and released with {@code FAIRLOCK.UNLOCK … LEASE ms REQUEST id ttl},
 * as for a {@link PlainLock}. Not fenced, no session holds (the module has neither for the fair lock),
 * and not part of a {@link MultiLock}. {@code FAIRLOCK.UNLOCK} replies "not held" when the lock no
 * longer exists (where Redisson's script replies "released"), so {@link #unlock()} throws {@link
 * NotHeldException} for a hold whose given lease ran out, as for the other kinds (unlike {@code
 * RFairLock}), and when this object knows the thread held nothing or the watchdog found the hold
 * gone.
 *
 * <pre>{@code
 * FairLock lock = new FairLock(client, "invoice:42");
 * if (lock.tryLock(5, TimeUnit.SECONDS)) {   // in line with every other waiter
 *     try {
 *         ...
 *     } finally {
 *         lock.unlock();
 *     }
 * }
 * }</pre>
 */
public final class FairLock extends DistributedLock {
    /**
     * The re-entrant fair lock {@code name}.
     *
     * @param client the client
     * @param name the lock's name (its key)
     */
    public FairLock(Client client, String name) {
        this(client, name, LockOptions.defaults());
    }

    /**
     * The fair lock {@code name} with options: re-entrant or not, and a loss listener.
     *
     * @param client the client
     * @param name the lock's name (its key)
     * @param options how it takes its holds; never fenced or session
     */
    public FairLock(Client client, String name, LockOptions options) {
        super(client, Plan.fair(checkName(name), check(options).reentrant()), options);
    }

    private static LockOptions check(LockOptions options) {
        if (options.fenced()) {
            throw new IllegalArgumentException("a fair lock takes no fencing tokens");
        }
        if (options.session()) {
            throw new IllegalArgumentException("a fair lock takes no session holds (FAIRLOCK.ACQUIRE has no SESSION)");
        }
        return options;
    }

    /**
     * A non-reentrant fair lock (Redisson's {@code RedissonNonReentrantFairLock}): its holder taking
     * it again gets {@link NotReentrantException}, at once, without joining the line.
     *
     * @param client the client
     * @param name the lock's name
     * @return the lock
     */
    public static FairLock nonReentrant(Client client, String name) {
        return new FairLock(client, name, LockOptions.defaults().withReentrant(false));
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
     * Deletes the lock whoever holds it ({@code FAIRLOCK.FORCEUNLOCK}) and tells the head of the
     * line; the holder's watchdog then reports it lost. The line stays.
     *
     * @return whether there was something to delete
     */
    public boolean forceUnlock() {
        return Plan.integer(command(List.of("FAIRLOCK.FORCEUNLOCK", getName()))) == 1;
    }

    /**
     * The owners waiting in the line now, first first ({@code FAIRLOCK.INFO}): this client's
     * waiters and Redisson's alike.
     *
     * @return the owners, {@code <client UUID>:<thread id>}; empty when nobody waits
     */
    public List<String> getWaiters() {
        List<String> owners = new ArrayList<>();
        for (Object entry : Plan.list(field(Plan.list(command(List.of("FAIRLOCK.INFO", getName()))), "line"))) {
            owners.add(Plan.text(field(Plan.list(entry), "owner")));
        }
        return owners;
    }

    /** The value after {@code name} in a flat name/value reply. */
    private static Object field(List<?> flat, String name) {
        for (int i = 0; i + 1 < flat.size(); i += 2) {
            if (name.equals(Plan.text(flat.get(i)))) {
                return flat.get(i + 1);
            }
        }
        throw new IllegalStateException("FAIRLOCK.INFO has no " + name + ": " + flat);
    }
}
