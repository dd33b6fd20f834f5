package io.github.rwlock.client;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.TimeUnit;

/**
 * Redisson's {@code RPermitExpirableSemaphore} on the module's {@code PERMIT.*} commands: a count of
 * free permits under one key and the permits taken, each with an id and a lease, in the sorted set
 * {@code {name}:timeout}, shared with Redisson's own semaphore of that name. A permit comes back when
 * its id is released or its lease ends; the server then serves the waiters at once (Redisson waits
 * until some client calls). Thread-safe.
 *
 * <pre>{@code
 * DistributedPermitExpirableSemaphore slots = new DistributedPermitExpirableSemaphore(client, "backend:slots");
 * slots.trySetPermits(3);                               // only if it has no count yet
 * String id = slots.tryAcquire(5, TimeUnit.SECONDS);    // waits on the server, up to 5 s
 * if (id != null) {
 *     try {
 *         callTheBackend();                             // the watchdog renews the permit's lease
 *     } finally {
 *         slots.release(id);
 *     }
 * }
 * }</pre>
 *
 * <p><b>Leases.</b> A permit taken without one gets the client's watchdog timeout, renewed every
 * third of it by {@code PERMIT.UPDATELEASE} until its id is released (or given a lease of its own
 * by {@link #updateLeaseTime}); when a renewal finds it gone (its lease ran out, or the semaphore
 * was deleted) the permit is {@link #isLost lost}, the {@link LockLostListener} is told, and the
 * watchdog stops. A lease of {@code -1} ({@link #NEVER_EXPIRES})
 * never ends, as Redisson's default; any other lease ends the permit when it runs out.
 *
 * <p><b>Waits</b> happen on the server ({@code PERMIT.ACQUIRE … BLOCK ms}), in arrival order, and
 * end there when the thread is interrupted; the interrupted call then holds nothing: permits
 * granted meanwhile are released again.
 *
 * <p><b>Lost replies.</b> Every acquisition carries a fresh request id ({@code REQUEST id ttl}); when
 * its reply is lost it is sent once more with the same id and the server replies the same ids,
 * taking nothing. The request latches are deleted in the {@code DEL} pipelined with this object's
 * next release, or expire. A release carries none: its lost reply is raised, never resent (a resend
 * could not tell its own release from an expiry).
 *
 * <p><b>Replica sync</b> applies to acquisitions as to the locks': permits the replicas did not
 * acknowledge are released again and {@link NotSyncedException} thrown.
 */
public final class DistributedPermitExpirableSemaphore {
    /** A lease that never ends (Redisson's {@code -1}), for {@link #tryAcquire(int, Duration, Duration)}. */
    public static final Duration NEVER_EXPIRES = Duration.ofMillis(-1);

    /** {@code leaseMs}: the watchdog's lease, renewed (the server's -1 is a lease that never ends). */
    private static final long WATCHED = 0;

    /** {@code waitMs}: wait without limit. */
    private static final long FOREVER = -1;

    private final Client client;
    private final String name;
    private final Exchange exchange;
    private final LockLostListener onLost;
    /** The acquisitions' latches whose replies came, for the next release's {@code DEL}. */
    private final Latches latches = new Latches();
    /** The watchdogs of the permits taken without a lease, by id. */
    private final Map<String, Watchdog> dogs = new ConcurrentHashMap<>();
    /** The ids whose watchdog found them gone, until a release names them. */
    private final Set<String> lost = ConcurrentHashMap.newKeySet();

    /**
     * The permit-expirable semaphore {@code name}.
     *
     * @param client the client
     * @param name the key of its count, as Redisson's {@code getPermitExpirableSemaphore(name)}
     */
    public DistributedPermitExpirableSemaphore(Client client, String name) {
        this(client, name, null);
    }

    /**
     * The permit-expirable semaphore {@code name}, whose watchdog tells {@code onLost} of a permit it
     * found gone ({@link LockLostListener#lockLost} with the semaphore's name and the permit's id).
     *
     * @param client the client
     * @param name the key of its count
     * @param onLost told of lost permits, from the watchdog's thread; {@code null}: nobody
     */
    public DistributedPermitExpirableSemaphore(Client client, String name, LockLostListener onLost) {
        this.client = Objects.requireNonNull(client, "client");
        this.name = DistributedLock.checkName(name);
        this.exchange = new Exchange(this.client, name);
        this.onLost = onLost;
    }

    /**
     * The semaphore's name.
     *
     * @return the key of its count
     */
    public String getName() {
        return name;
    }

    // -- acquisitions -----------------------------------------------------------------------------

    /**
     * Takes a permit, waiting without limit on the server; the watchdog keeps it.
     *
     * @return its id
     * @throws InterruptedException interrupted before or while waiting; nothing is taken
     * @throws NotSyncedException the replicas did not acknowledge it (released again)
     */
    public String acquire() throws InterruptedException {
        return acquire(1).get(0);
    }

    /**
     * Takes a permit for {@code leaseTime}, waiting without limit on the server.
     *
     * @param leaseTime how long the permit lasts; -1: it never expires
     * @param unit its unit
     * @return its id
     * @throws InterruptedException interrupted before or while waiting; nothing is taken
     */
    public String acquire(long leaseTime, TimeUnit unit) throws InterruptedException {
        return acquire(1, leaseTime, unit).get(0);
    }

    /**
     * Takes {@code permits} at once, waiting without limit on the server; the watchdog keeps them.
     *
     * @param permits how many, at least 1
     * @return their ids
     * @throws InterruptedException interrupted before or while waiting; nothing is taken
     */
    public List<String> acquire(int permits) throws InterruptedException {
        return Waiter.interruptibly(name, () -> take(permits, FOREVER, WATCHED, true));
    }

    /**
     * Takes {@code permits} at once for {@code leaseTime} each, waiting without limit on the server.
     *
     * @param permits how many, at least 1
     * @param leaseTime how long each lasts; -1: they never expire
     * @param unit its unit
     * @return their ids
     * @throws InterruptedException interrupted before or while waiting; nothing is taken
     */
    public List<String> acquire(int permits, long leaseTime, TimeUnit unit) throws InterruptedException {
        long leaseMs = leaseMs(leaseTime, unit);
        return Waiter.interruptibly(name, () -> take(permits, FOREVER, leaseMs, true));
    }

    /**
     * Takes a permit if one is free now and nobody waits (one command, no wait); the watchdog keeps
     * it.
     *
     * @return its id, or {@code null} when none was free
     */
    public String tryAcquire() {
        return first(take(1, 0, WATCHED, false));
    }

    /**
     * Waits up to {@code waitTime} on the server for a permit; the watchdog keeps it.
     *
     * @param waitTime how long to wait; 0 tries once; negative waits without limit
     * @param unit its unit
     * @return its id, or {@code null} when the wait ran out
     * @throws InterruptedException interrupted before or while waiting; nothing is taken
     */
    public String tryAcquire(long waitTime, TimeUnit unit) throws InterruptedException {
        return first(waiting(1, waitMs(waitTime, unit), WATCHED));
    }

    /**
     * Waits up to {@code waitTime} on the server for a permit lasting {@code leaseTime}, as
     * Redisson's {@code tryAcquire(waitTime, leaseTime, unit)}.
     *
     * @param waitTime how long to wait; 0 tries once; negative waits without limit
     * @param leaseTime how long the permit lasts; -1: it never expires
     * @param unit the unit of both
     * @return its id, or {@code null} when the wait ran out
     * @throws InterruptedException interrupted before or while waiting; nothing is taken
     */
    public String tryAcquire(long waitTime, long leaseTime, TimeUnit unit) throws InterruptedException {
        return first(waiting(1, waitMs(waitTime, unit), leaseMs(leaseTime, unit)));
    }

    /**
     * Waits up to {@code waitTime} on the server for {@code permits} lasting {@code leaseTime} each,
     * taken all at once, as Redisson's {@code tryAcquire(permits, waitTime, leaseTime, unit)}.
     *
     * @param permits how many, at least 1
     * @param waitTime how long to wait; 0 tries once; negative waits without limit
     * @param leaseTime how long each lasts; -1: they never expire
     * @param unit the unit of both
     * @return their ids; empty when the wait ran out
     * @throws InterruptedException interrupted before or while waiting; nothing is taken
     */
    public List<String> tryAcquire(int permits, long waitTime, long leaseTime, TimeUnit unit)
            throws InterruptedException {
        return waiting(permits, waitMs(waitTime, unit), leaseMs(leaseTime, unit));
    }

    /**
     * Acquires {@code permits} with the package's general options, for callers with {@link
     * Duration}s.
     *
     * @param permits how many, at least 1
     * @param wait how long to wait on the server; {@code null} without limit, zero tries once
     * @param lease how long each lasts; {@code null} for the watchdog's lease, renewed; {@link
     *     #NEVER_EXPIRES} (any negative one): they never expire
     * @return their ids; empty when the wait ran out
     * @throws InterruptedException interrupted before or while waiting; nothing is taken
     */
    public List<String> tryAcquire(int permits, Duration wait, Duration lease) throws InterruptedException {
        long waitMs = wait == null ? FOREVER : Durations.waitMs(wait);
        long leaseMs = lease == null ? WATCHED : lease.isNegative() ? -1 : Durations.leaseMs(lease);
        return waiting(permits, waitMs, leaseMs);
    }

    /** {@link #take}, ended by an interrupt. */
    private List<String> waiting(int permits, long waitMs, long leaseMs) throws InterruptedException {
        return Waiter.interruptibly(name, () -> take(permits, waitMs, leaseMs, true));
    }

    private static long waitMs(long waitTime, TimeUnit unit) {
        return waitTime < 0 ? FOREVER : Durations.waitMs(waitTime, unit);
    }

    private static long leaseMs(long leaseTime, TimeUnit unit) {
        return leaseTime == -1 ? -1 : Durations.leaseMs(leaseTime, unit);
    }

    private static String first(List<String> ids) {
        return ids.isEmpty() ? null : ids.get(0);
    }

    /**
     * One acquisition: {@code waitMs} 0 tries once, {@link #FOREVER} waits without limit; {@code
     * leaseMs} {@link #WATCHED} takes the watchdog's lease and starts a watchdog per id; an
     * interrupt ends it only when {@code interruptible} (and then throws {@link Waiter.Ended}).
     */
    private List<String> take(int permits, long waitMs, long leaseMs, boolean interruptible) {
        if (permits < 1) {
            throw new IllegalArgumentException("permits must be at least 1: " + permits);
        }
        long blockMs = waitMs == FOREVER ? 0 : waitMs == 0 ? Plan.NO_BLOCK : waitMs;
        long lease = leaseMs == WATCHED ? client.watchdogTimeoutMs() : leaseMs;
        String count = Integer.toString(permits);
        String request = UUID.randomUUID().toString();
        Exchange.Acquisition what = new Exchange.Acquisition() {
            @Override
            public List<String> command(long block) {
                List<String> args = new ArrayList<>(List.of("PERMIT.ACQUIRE", name, count, Long.toString(lease)));
                Plan.addBlock(args, block);
                args.addAll(List.of("REQUEST", request, Long.toString(Plan.acquisitionLatchTtl(block))));
                return args;
            }

            @Override
            public List<String> touch(long block) {
                return Plan.touchAcquisitionLatch(name, request, block);
            }

            @Override
            public boolean granted(Object reply) {
                // Refused: the nearest expiry (an integer) or nil.
                return reply != null && !(reply instanceof Long);
            }

            @Override
            public List<String> undo(Object reply) {
                return releaseCommand(ids(reply));
            }
        };
        Exchange.Acquired got;
        try {
            got = exchange.acquire(what, null, true, blockMs, interruptible);
        } catch (Waiter.Cancelled cancelled) {
            giveBackAfterInterrupt(what, request, cancelled);
            throw new Waiter.Ended(name);
        }
        got.link().close();
        List<String> ids = what.granted(got.reply()) ? ids(got.reply()) : List.of();
        if (!ids.isEmpty()) {
            latches.keep(Plan.acquisitionLatch(name, request), Plan.acquisitionLatchTtl(blockMs));
            if (leaseMs == WATCHED) {
                for (String id : ids) {
                    watch(id, lease);
                }
            }
        }
        return ids;
    }

    /** The ids of a grant: an array of them, for one permit too (as Redisson's script replies). */
    private static List<String> ids(Object reply) {
        List<String> ids = new ArrayList<>();
        for (Object item : Plan.list(reply)) {
            ids.add(Plan.text(item));
        }
        return ids;
    }

    /**
     * The wait was ended by an interrupt: permits the server granted at that moment are released
     * again, so that the interrupted call holds nothing.
     */
    private void giveBackAfterInterrupt(Exchange.Acquisition what, String request, Waiter.Cancelled cancelled) {
        try {
            Object grant = exchange.grantedDespiteInterrupt(what, request, cancelled);
            if (grant != null) {
                latches.keep(Plan.acquisitionLatch(name, request), Plan.LATCH_TTL_MS);
                tryRelease(ids(grant));
            }
        } catch (RuntimeException e) {
            // The server is unreachable: permits it granted, if any, come back when their lease
            // ends (no watchdog was started for them), or never with a lease of -1, as a
            // Redisson client's that crashed.
        }
    }

    // -- the watchdog -----------------------------------------------------------------------------

    private void watch(String id, long leaseMs) {
        lost.remove(id);
        Watchdog dog = new Watchdog(leaseMs, () -> updateLeaseMs(id, leaseMs), () -> {
            dogs.remove(id);
            lost.add(id);
            if (onLost != null) {
                onLost.lockLost(name, id);
            }
        });
        dogs.put(id, dog);
        dog.start(client.scheduler());
    }

    private void unwatch(Collection<String> ids) {
        for (String id : ids) {
            Watchdog dog = dogs.remove(id);
            if (dog != null) {
                dog.stop();
            }
            lost.remove(id);
        }
    }

    /**
     * Whether the watchdog found the permit {@code id} gone (its lease ran out, or the semaphore was
     * deleted), until a release names it.
     *
     * @param id a permit's id
     * @return whether it was lost
     */
    public boolean isLost(String id) {
        return lost.contains(id);
    }

    // -- releases ---------------------------------------------------------------------------------

    private List<String> releaseCommand(Collection<String> ids) {
        List<String> args = new ArrayList<>(List.of("PERMIT.RELEASE", name));
        args.addAll(ids);
        return args;
    }

    /**
     * Releases the permit {@code id} and serves the waiters, as Redisson's {@code release(id)}.
     *
     * @param id the permit's id
     * @throws NotHeldException it is not held (released before, or its lease ran out)
     */
    public void release(String id) {
        release(List.of(Objects.requireNonNull(id, "id")));
    }

    /**
     * Releases every permit in {@code ids}, all or none, as Redisson's {@code release(ids)}.
     *
     * @param ids the permits' ids, at least one
     * @throws NotHeldException one of them is not held: none was released
     */
    public void release(Collection<String> ids) {
        if (tryRelease(ids) == 0) {
            throw new NotHeldException(name + ": permits " + ids + " are not all held; none was released");
        }
    }

    /**
     * Releases every permit in {@code ids}, all or none, in one {@code PERMIT.RELEASE} (with the
     * {@code DEL} of this object's acquisition latches), stopping their watchdogs, and serves the
     * waiters, as Redisson's {@code tryRelease(ids)}. Not resent after a lost reply (raised): a
     * resend could not tell its own release from an expiry.
     *
     * @param ids the permits' ids, at least one
     * @return how many were released: all of them, or 0 when one is not held
     */
    public int tryRelease(Collection<String> ids) {
        if (ids.isEmpty()) {
            throw new IllegalArgumentException("no permit ids to release");
        }
        List<String> copy = List.copyOf(ids);
        int released;
        try {
            released = Math.toIntExact(Plan.integer(exchange.release(releaseCommand(copy), false, latches.take()).reply()));
        } catch (RuntimeException e) {
            // The release may have been applied: renewing would only find the permits gone.
            unwatch(copy);
            throw e;
        }
        if (released > 0) {
            unwatch(copy);
        } else {
            // Refused: the held ids keep their watchdogs; the caller has heard of the others.
            lost.removeAll(copy);
        }
        return released;
    }

    /**
     * Releases the permit {@code id} with {@code PERMIT.TRYRELEASE}, as Redisson's {@code
     * tryRelease(id)}, stopping its watchdog.
     *
     * @param id the permit's id
     * @return true, or false when its lease had run out (it comes back all the same) or it is not
     *     held
     */
    public boolean tryRelease(String id) {
        Objects.requireNonNull(id, "id");
        try {
            return Plan.integer(exchange.release(List.of("PERMIT.TRYRELEASE", name, id), false, latches.take()).reply()) == 1;
        } finally {
            unwatch(List.of(id));
        }
    }

    // -- leases -----------------------------------------------------------------------------------

    /**
     * Gives the held permit {@code id} a new lease from now, as Redisson's {@code
     * updateLeaseTime(id, leaseTime, unit)}. A permit the watchdog renewed keeps the lease given
     * here: its watchdog stops.
     *
     * @param id the permit's id
     * @param leaseTime the new lease; -1: it never expires
     * @param unit its unit
     * @return whether it is held
     */
    public boolean updateLeaseTime(String id, long leaseTime, TimeUnit unit) {
        long leaseMs = leaseMs(leaseTime, unit);
        Watchdog dog = dogs.remove(Objects.requireNonNull(id, "id"));
        if (dog != null) {
            // Stopped first: no later renewal replaces the lease given here (one already on its
            // way may still land before this update).
            dog.stop();
        }
        return updateLeaseMs(id, leaseMs);
    }

    private boolean updateLeaseMs(String id, long leaseMs) {
        return Plan.integer(exchange.call(List.of("PERMIT.UPDATELEASE", name, id, Long.toString(leaseMs)))) == 1;
    }

    /**
     * The time the held permit {@code id} has left (Redisson's {@code getLeaseTime}, which throws
     * where this replies 0).
     *
     * @param id the permit's id
     * @return its ms left; -1 when it never expires; 0 when it is not held
     */
    public long getLeaseTime(String id) {
        return Plan.integer(exchange.call(List.of("PERMIT.LEASETIME", name, Objects.requireNonNull(id, "id"))));
    }

    // -- the count --------------------------------------------------------------------------------

    /**
     * Sets the free count to {@code permits} if the semaphore has none yet, and serves the waiters.
     *
     * @param permits the count
     * @return whether it was set (false: a count exists)
     */
    public boolean trySetPermits(int permits) {
        return Plan.integer(exchange.call(List.of("PERMIT.TRYSETPERMITS", name, Integer.toString(permits)))) == 1;
    }

    /**
     * Makes free plus taken permits {@code permits} (Redisson's {@code setPermits}) and serves the
     * waiters.
     *
     * @param permits the total
     */
    public void setPermits(int permits) {
        exchange.call(List.of("PERMIT.SETPERMITS", name, Integer.toString(permits)));
    }

    /**
     * Adds {@code permits} to the free count (a negative number takes them away, possibly below 0)
     * and serves the waiters.
     *
     * @param permits how many
     */
    public void addPermits(int permits) {
        exchange.call(List.of("PERMIT.ADDPERMITS", name, Integer.toString(permits)));
    }

    /**
     * The free permits, after expired ones came back (0 when the semaphore has no count).
     *
     * @return the count
     * @throws ArithmeticException the count is outside the {@code int} range
     */
    public int availablePermits() {
        return count("PERMIT.AVAILABLE");
    }

    /**
     * The permits taken now (expired ones not counted).
     *
     * @return how many
     */
    public int acquiredPermits() {
        return count("PERMIT.ACQUIRED");
    }

    /**
     * Free plus taken permits (0 when the semaphore has no count).
     *
     * @return the total
     * @throws ArithmeticException it is outside the {@code int} range
     */
    public int getPermits() {
        return count("PERMIT.PERMITS");
    }

    private int count(String command) {
        return Math.toIntExact(Plan.integer(exchange.call(List.of(command, name))));
    }

    @Override
    public String toString() {
        return "DistributedPermitExpirableSemaphore(" + name + ")";
    }
}
