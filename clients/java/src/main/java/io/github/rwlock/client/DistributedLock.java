package io.github.rwlock.client;

import java.time.Duration;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import redis.clients.jedis.exceptions.JedisConnectionException;
import redis.clients.jedis.exceptions.JedisDataException;

/**
 * What every lock object of this package does ({@link PlainLock}, {@link FairLock}, the two sides of a
 * {@link DistributedReadWriteLock}, {@link MultiLock}): acquire with a wait and a lease, release, the
 * watchdog, session holds, fencing tokens and replica sync, as {@link
 * java.util.concurrent.locks.Lock}.
 *
 * <p><b>Owners.</b> Each thread is its own owner, {@code <client UUID>:<thread id>} as Redisson
 * forms it, and re-enters its own holds. A lock object is safe to share between threads.
 *
 * <p><b>Waits</b> happen on the server ({@code BLOCK}), never by polling: {@link #lock()} waits
 * without limit, {@link #tryLock()} tries once, {@link #tryLock(long, TimeUnit)} waits up to the
 * time given, any longer than the connection's socket timeout. The interruptible ones, {@link
 * #lockInterruptibly()} and the timed {@code tryLock}s, end the server-side wait when the thread
 * is interrupted, and then hold nothing.
 *
 * <p><b>Leases.</b> Without one, a hold gets the client's watchdog timeout (30 s) and the
 * watchdog renews it every third of it until the release; if a renewal finds it gone, the lock
 * reports {@link #isLost()}, calls the {@link LockLostListener}, and {@link #unlock()} throws
 * {@link NotHeldException}. With a lease, no watchdog: the hold ends when the lease does.
 *
 * <p><b>Lost replies.</b> A single lock's acquisition and release carry {@code HELD n}: how many
 * holds of that kind the owner had before the call, as the client counts them across all its lock
 * objects (two objects of one name used by one thread are one owner). When the reply is lost (a
 * connection error or a read timeout) the call is sent once more, the same: an acquisition whose
 * first send was granted finds the count {@code n + 1} and is answered as granted, changing
 * nothing, so the hold counts once; a release whose first send released finds {@code n - 1} and
 * is answered 0, so it never frees a second level. A last release's resend that finds nothing held
 * cannot tell whether its first send freed the lock or the hold was gone before it: {@link
 * #unlock()} throws {@link ReleaseUnknownException}. No latch is written: a cycle is two commands.
 */
public abstract class DistributedLock implements java.util.concurrent.locks.Lock {
    /** {@code waitMs}: wait without limit. */
    static final long FOREVER = -1;

    /** {@code leaseMs}: no lease given (the watchdog's). */
    static final long NO_LEASE = -1;

    final Client client;
    final Plan plan;
    final boolean session;
    private final Exchange exchange;
    private final LockLostListener onLost;
    private final Map<String, State> states = new ConcurrentHashMap<>();
    /**
     * One owner's holds of this lock taken through this object. Guarded by the lock object. (The
     * count the server's hash keeps, of every object of the client, is {@link Client#holdCounts}.)
     */
    private static final class State {
        int count;
        Long token;
        boolean lost;
        long leaseMs;
        Link sessionLink;
        Watchdog dog;
    }

    DistributedLock(Client client, Plan plan, LockOptions options) {
        this.client = Objects.requireNonNull(client, "client");
        this.plan = plan;
        this.exchange = new Exchange(this.client, plan.key());
        this.session = options.session();
        this.onLost = options.onLost();
    }

    static String checkName(String name) {
        Objects.requireNonNull(name, "name");
        if (name.isEmpty()) {
            throw new IllegalArgumentException("a lock name cannot be empty");
        }
        return name;
    }

    /**
     * The lock's name (a multi-lock: its first name, which routes its commands).
     *
     * @return the key
     */
    public String getName() {
        return plan.key();
    }

    /**
     * The calling thread's owner.
     *
     * @return {@code <client UUID>:<thread id>}
     */
    public String getOwner() {
        return client.currentOwner();
    }

    // -- java.util.concurrent.locks.Lock ----------------------------------------------------------

    /**
     * Waits without limit for the lock; the watchdog keeps it. Not interruptible (use {@link
     * #lockInterruptibly()}).
     *
     * @throws NotReentrantException a non-reentrant lock's holder asking again
     * @throws NotSyncedException the replicas did not acknowledge it (released again)
     */
    @Override
    public void lock() {
        acquire(FOREVER, NO_LEASE, false);
    }

    /**
     * Waits without limit for the lock, held for {@code lease} (no watchdog). Not interruptible.
     *
     * @param lease how long the hold lasts, positive
     * @param unit its unit
     */
    public void lock(long lease, TimeUnit unit) {
        acquire(FOREVER, Durations.leaseMs(lease, unit), false);
    }

    /**
     * Waits without limit for the lock (the watchdog keeps it); an interrupt ends the wait on the
     * server too.
     *
     * @throws InterruptedException interrupted before or while waiting; nothing is held
     */
    @Override
    public void lockInterruptibly() throws InterruptedException {
        acquireInterruptibly(FOREVER, NO_LEASE);
    }

    /**
     * Waits without limit for the lock, held for {@code lease}; an interrupt ends the wait.
     *
     * @param lease how long the hold lasts, positive
     * @param unit its unit
     * @throws InterruptedException interrupted before or while waiting; nothing is held
     */
    public void lockInterruptibly(long lease, TimeUnit unit) throws InterruptedException {
        acquireInterruptibly(FOREVER, Durations.leaseMs(lease, unit));
    }

    /**
     * Takes the lock if it is free now (one command, no wait); the watchdog keeps it.
     *
     * @return whether it was taken
     */
    @Override
    public boolean tryLock() {
        return acquire(0, NO_LEASE, false).acquired();
    }

    /**
     * Waits up to {@code wait} for the lock (on the server); the watchdog keeps it.
     *
     * @param wait how long to wait; 0 tries once
     * @param unit its unit
     * @return whether it was taken before the wait ran out
     * @throws InterruptedException interrupted before or while waiting; nothing is held
     */
    @Override
    public boolean tryLock(long wait, TimeUnit unit) throws InterruptedException {
        return acquireInterruptibly(Durations.waitMs(wait, unit), NO_LEASE).acquired();
    }

    /**
     * Waits up to {@code wait} for the lock, held for {@code lease} (no watchdog), as Redisson's
     * {@code tryLock(waitTime, leaseTime, unit)}.
     *
     * @param wait how long to wait; 0 tries once; negative waits without limit
     * @param lease how long the hold lasts; negative: the watchdog's lease, renewed
     * @param unit the unit of both
     * @return whether it was taken before the wait ran out
     * @throws InterruptedException interrupted before or while waiting; nothing is held
     */
    public boolean tryLock(long wait, long lease, TimeUnit unit) throws InterruptedException {
        long waitMs = wait < 0 ? FOREVER : Durations.waitMs(wait, unit);
        long leaseMs = lease < 0 ? NO_LEASE : Durations.leaseMs(lease, unit);
        return acquireInterruptibly(waitMs, leaseMs).acquired();
    }

    /**
     * Acquires with the package's general options, for callers with {@link Duration}s.
     *
     * @param wait how long to wait on the server; {@code null} without limit, zero tries once
     * @param lease how long the hold lasts; {@code null} for the watchdog's lease, renewed
     * @return whether it was taken before the wait ran out
     * @throws InterruptedException interrupted before or while waiting; nothing is held
     */
    public boolean acquire(Duration wait, Duration lease) throws InterruptedException {
        return acquireInterruptibly(wait == null ? FOREVER : Durations.waitMs(wait), lease == null ? NO_LEASE : Durations.leaseMs(lease))
                .acquired();
    }

    /**
     * Acquires for a try-with-resources block; the {@link Held} gives the fencing token and
     * releases the hold when closed.
     *
     * @param wait how long to wait on the server; {@code null} without limit, zero tries once
     * @param lease how long the hold lasts; {@code null} for the watchdog's lease, renewed
     * @return the hold
     * @throws NotAcquiredException the wait ran out
     * @throws InterruptedException interrupted before or while waiting; nothing is held
     */
    public Held hold(Duration wait, Duration lease) throws InterruptedException {
        Plan.Outcome outcome = acquireInterruptibly(
                wait == null ? FOREVER : Durations.waitMs(wait), lease == null ? NO_LEASE : Durations.leaseMs(lease));
        if (!outcome.acquired()) {
            throw new NotAcquiredException(getName(), outcome.pttl());
        }
        return new Held(outcome.token(), this::unlock);
    }

    /**
     * Waits without limit, as {@link #lock()}, and returns the fencing token (Redisson's {@code
     * lockAndGetToken}).
     *
     * @return the token, or {@code null} when the lock is not fenced
     */
    public Long lockAndGetToken() {
        return acquire(FOREVER, NO_LEASE, false).token();
    }

    /**
     * Releases one of the calling thread's holds; the lock is free once every hold is released.
     * One command: a single lock's carries {@code HELD n} (the thread's count before it) and is
     * resent once, the same, after a connection error.
     *
     * @throws NotHeldException the thread held nothing here: never taken, released, or lost
     * @throws ReleaseUnknownException a last release's reply was lost and its resend found nothing
     *     held: it freed the lock, or the hold was gone before it; nothing is held now either way
     */
    @Override
    public void unlock() {
        String owner = getOwner();
        State state = states.get(owner);
        Link sessionLink;
        long leaseMs;
        synchronized (this) {
            sessionLink = state == null ? null : state.sessionLink;
            leaseMs = state == null ? client.watchdogTimeoutMs() : state.leaseMs;
        }
        Object reply;
        boolean unknown = false;
        if (sessionLink != null) {
            try {
                reply = sessionLink.call(plan.release(owner, leaseMs, null), Link.DEFAULT);
            } catch (JedisConnectionException e) {
                // The session's connection is gone, and with it its holds.
                int gone;
                synchronized (this) {
                    gone = state.count;
                    forget(owner, state);
                }
                for (Hold hold : plan.holds) {
                    client.holdCounts().add(countKey(hold, owner), -gone);
                }
                sessionLink.drop();
                throw new NotHeldException(getName() + ": the session's connection closed");
            }
        } else if (plan.multi) {
            reply = exchange.release(plan.release(owner, leaseMs, null), false, List.of()).reply();
        } else {
            // A count of 0 (a hold this client does not know of: another client's with its id, or
            // a loss noticed) sends none: HELD 1 would mean the same, a release never replayed.
            int held = client.holdCounts().get(countKey(plan.holds.get(0), owner));
            Exchange.Released sent = exchange.release(plan.release(owner, leaseMs, held > 0 ? held : null), true, List.of());
            reply = sent.reply();
            // A resend's nil after a last release: the first send may have freed it. Never
            // "released" (the hold may have been gone before it), never "not held" (it may not).
            unknown = reply == null && sent.resent() && held <= 1;
        }
        countReleased(owner, reply);
        Boolean released = plan.released(reply);
        if (plan.fair && Boolean.TRUE.equals(released)) {
            synchronized (this) {
                // A thread this object knows held nothing, or lost its hold, is told so whatever
                // the reply.
                if (state == null || state.lost) {
                    released = null;
                }
            }
        }
        Link toClose = null;
        synchronized (this) {
            if (state != null) {
                state.count--;
                if (released == null || released || state.count <= 0) {
                    toClose = forget(owner, state);
                }
            }
        }
        if (toClose != null) {
            toClose.close();
        }
        if (unknown) {
            throw new ReleaseUnknownException(getName() + ": the release's reply was lost and the owner no longer holds"
                    + " the lock: this release freed it or the hold was gone before it");
        }
        if (released == null) {
            throw new NotHeldException(getName() + " is not held by " + owner);
        }
    }

    /** The key of {@code owner}'s count of {@code hold} ({@link Client#holdCounts}). */
    private static HoldCounts.Key countKey(Hold hold, String owner) {
        return new HoldCounts.Key(hold.name(), owner, hold.kind());
    }

    /**
     * The client's counts after a release's {@code reply}: 1 (that kind's field is gone) or nil
     * (none held) leaves none, 0 one fewer. A multi-lock's reply has one of those per hold.
     */
    private void countReleased(String owner, Object reply) {
        List<?> each = plan.multi && reply != null ? Plan.list(reply) : null;
        for (int i = 0; i < plan.holds.size(); i++) {
            Object one = each == null ? reply : each.get(i);
            HoldCounts.Key key = countKey(plan.holds.get(i), owner);
            if (one == null || Plan.integer(one) == 1) {
                client.holdCounts().clear(key);
            } else {
                client.holdCounts().add(key, -1);
            }
        }
    }

    /**
     * Not supported, as with Redisson's locks.
     *
     * @return never
     * @throws UnsupportedOperationException always
     */
    @Override
    public Condition newCondition() {
        throw new UnsupportedOperationException("a distributed lock has no conditions");
    }

    // -- the state ------------------------------------------------------------------------------

    /**
     * Whether the calling thread holds this lock, as far as this process knows (see {@link
     * #isLost()}).
     *
     * @return whether it holds it
     */
    public synchronized boolean isHeldByCurrentThread() {
        State state = states.get(getOwner());
        return state != null && !state.lost && state.count > 0;
    }

    /**
     * How many holds the calling thread has of this lock through this object (re-entries count).
     *
     * @return the count, 0 when none
     */
    public synchronized int getHoldCount() {
        State state = states.get(getOwner());
        return state == null || state.lost ? 0 : state.count;
    }

    /**
     * Whether the watchdog found the calling thread's hold gone (its lease ran out, or the lock was
     * forced open); {@link #unlock()} then throws {@link NotHeldException}.
     *
     * @return whether it was lost
     */
    public synchronized boolean isLost() {
        State state = states.get(getOwner());
        return state != null && state.lost;
    }

    /**
     * The fencing token of the calling thread's latest acquisition.
     *
     * @return the token, or {@code null} when not fenced or not held
     */
    public synchronized Long getToken() {
        State state = states.get(getOwner());
        return state == null ? null : state.token;
    }

    // -- acquire --------------------------------------------------------------------------------

    private Plan.Outcome acquireInterruptibly(long waitMs, long leaseMs) throws InterruptedException {
        return Waiter.interruptibly(getName(), () -> acquire(waitMs, leaseMs, true));
    }

    /**
     * The acquisition; interrupts end it only when {@code interruptible} (and then throw).
     *
     * <p>A single lock's acquisition carries {@code HELD n}, the thread's count before it, and is
     * resent once, the same, after a lost reply ({@link Exchange#acquire}); one on a session's own
     * connection (a re-entry) is not resent. A session acquisition sends no {@code HELD}, its resend
     * neither: the server gives back what the lost reply's connection held in its next event-loop
     * turn, so a resend arriving before that would find the count {@code n + 1} and be answered as
     * granted, a hold about to go; sent plain it re-enters, and the give-back then takes the dead
     * connection's level.
     */
    private Plan.Outcome acquire(long waitMs, long leaseMs, boolean interruptible) {
        String owner = getOwner();
        boolean watched = leaseMs == NO_LEASE;
        long lease = watched ? client.watchdogTimeoutMs() : leaseMs;
        long blockMs = waitMs == FOREVER ? 0 : waitMs == 0 ? Plan.NO_BLOCK : waitMs;
        Link sessionLink;
        synchronized (this) {
            State state = states.get(owner);
            sessionLink = state == null ? null : state.sessionLink;
        }
        Integer held = plan.multi || session ? null : client.holdCounts().get(countKey(plan.holds.get(0), owner));
        Exchange.Acquisition what = new Exchange.Acquisition() {
            @Override
            public List<String> command(long block) {
                return plan.acquire(owner, lease, block, session, held);
            }

            @Override
            public boolean granted(Object reply) {
                return plan.outcome(reply).acquired();
            }

            @Override
            public List<String> undo(Object reply) {
                return plan.release(owner, lease, null);
            }

            @Override
            public void beforeResend(Link link) {
                if (plan.fair && blockMs != Plan.NO_BLOCK) {
                    // In case the server still believes the waiting connection open: its place in
                    // the line goes (a grant it got stays, and the resend replays it).
                    link.call(plan.cancel(owner, blockMs), Link.DEFAULT);
                }
            }
        };
        Exchange.Acquired got;
        try {
            got = exchange.acquire(what, sessionLink, plan.resendable(), blockMs, interruptible);
        } catch (Waiter.Cancelled cancelled) {
            cleanUpAfterInterrupt(owner, lease, blockMs, cancelled);
            throw new Waiter.Ended(getName());
        }
        Plan.Outcome outcome = plan.outcome(got.reply());
        boolean keep = outcome.acquired() && session;
        if (got.link() != sessionLink && !keep) {
            got.link().close();
        }
        if (outcome.acquired()) {
            record(owner, lease, watched, outcome, keep ? got.link() : null);
        }
        return outcome;
    }

    /**
     * The wait was ended by an interrupt. If the server served it at that moment the thread holds
     * what it never heard of: release it, so that the interrupted call holds nothing; unless the
     * thread held it before (the client's count), whose hold a release of a wait not served would
     * take. (A session hold went with the killed connection.)
     */
    private void cleanUpAfterInterrupt(String owner, long lease, long blockMs, Waiter.Cancelled cancelled) {
        boolean servedOrUnknown = !cancelled.replied
                || !(cancelled.reply instanceof JedisDataException) && plan.outcome(cancelled.reply).acquired();
        boolean heldBefore = false;
        for (Hold hold : plan.holds) {
            heldBefore |= client.holdCounts().get(countKey(hold, owner)) > 0;
        }
        if (plan.fair) {
            // The killed connection takes its waiter out of the line at the server's next look;
            // FAIRLOCK.CANCEL does it now, and is harmless when it already left or was served.
            Link link = client.connector().open(plan.key());
            try {
                link.call(plan.cancel(owner, blockMs), Link.DEFAULT);
            } catch (RuntimeException e) {
                // Unreachable: the server drops a waiter that does not come back at its deadline.
            } finally {
                link.close();
            }
        }
        if (!servedOrUnknown || heldBefore || session) {
            return;
        }
        Link link = client.connector().open(plan.key());
        try {
            link.call(plan.release(owner, lease, null), Link.DEFAULT);
        } catch (RuntimeException e) {
            // The server is unreachable: a hold it gave, if any, ends with its lease.
        } finally {
            link.close();
        }
    }

    private void record(String owner, long leaseMs, boolean watched, Plan.Outcome outcome, Link link) {
        synchronized (this) {
            State state = states.computeIfAbsent(owner, o -> new State());
            if (state.lost) {
                // Taken again after a loss, without the release that would have dropped the
                // lost holds: counting starts anew.
                state.count = 0;
            }
            state.count++;
            state.token = outcome.token();
            state.lost = false;
            state.leaseMs = leaseMs;
            if (link != null && state.sessionLink == null) {
                state.sessionLink = link;
            }
            for (Hold hold : plan.holds) {
                client.holdCounts().add(countKey(hold, owner), 1);
            }
            if (watched && !session && state.dog == null) {
                Watchdog dog = new Watchdog(leaseMs, () -> renew(owner, leaseMs), () -> lost(owner, state));
                state.dog = dog;
                dog.start(client.scheduler());
            }
        }
    }

    // -- the watchdog ---------------------------------------------------------------------------

    private boolean renew(String owner, long leaseMs) {
        Link link = client.connector().open(plan.key());
        try {
            return plan.renewed(link.call(plan.renew(owner, leaseMs), Link.DEFAULT));
        } finally {
            link.close();
        }
    }

    private void lost(String owner, State state) {
        synchronized (this) {
            state.lost = true;
            state.dog = null;
        }
        // The server holds none of it for the owner any more (a multi-lock: not all of it, and
        // the renewal does not say which: every count goes, and a single lock's next release of
        // one of its names then sends no HELD).
        for (Hold hold : plan.holds) {
            client.holdCounts().clear(countKey(hold, owner));
        }
        if (onLost != null) {
            onLost.lockLost(getName(), owner);
        }
    }

    /**
     * Called holding the lock object: stops the watchdog, drops the owner's holds, and returns the
     * session's connection for the caller to give back (nothing is bound to it any more).
     */
    private Link forget(String owner, State state) {
        if (state.dog != null) {
            state.dog.stop();
            state.dog = null;
        }
        Link link = state.sessionLink;
        state.sessionLink = null;
        states.remove(owner, state);
        return link;
    }

    /** One command on a connection of the lock's key (introspection, force unlock). */
    Object command(List<String> args) {
        return exchange.call(args);
    }

    /** Whether the lock's key exists: someone holds it. */
    boolean exists() {
        return Plan.integer(command(List.of("EXISTS", plan.key()))) == 1;
    }

    /** The PTTL of the lock's key: what its holds have left, -2 when nobody holds it. */
    long pttl() {
        return Plan.integer(command(List.of("PTTL", plan.key())));
    }

    /** The kind and name this lock takes, for a {@link MultiLock}. */
    Hold asHold() {
        if (plan.multi) {
            throw new IllegalArgumentException("a MultiLock cannot hold another MultiLock");
        }
        if (plan.fair) {
            throw new IllegalArgumentException("a MultiLock cannot hold a fair lock: LOCK.ACQUIREALL takes no line");
        }
        return plan.holds.get(0);
    }

    @Override
    public String toString() {
        return getClass().getSimpleName() + "(" + getName() + ")";
    }
}
