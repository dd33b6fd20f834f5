package io.github.rwlock.client;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.UUID;
import java.util.concurrent.TimeUnit;

/**
 * Redisson's {@code RSemaphore} on the module's {@code SEMAPHORE.*} commands, modelled on {@link
 * java.util.concurrent.Semaphore}: a count of free permits under one key, shared with Redisson's
 * own semaphore of that name. Permits have no owner: any thread, process or Redisson client may
 * release them. Thread-safe.
 *
 * <pre>{@code
 * DistributedSemaphore slots = new DistributedSemaphore(client, "backend:slots");
 * slots.trySetPermits(3);                       // only if it has no count yet
 * if (slots.tryAcquire(5, TimeUnit.SECONDS)) {  // waits on the server, up to 5 s
 *     try {
 *         callTheBackend();
 *     } finally {
 *         slots.release();
 *     }
 * }
 * }</pre>
 *
 * <p><b>Waits</b> happen on the server ({@code SEMAPHORE.ACQUIRE … BLOCK ms}), in arrival order
 * among this package's and the module's other clients: a waiter for 3 permits is not passed by
 * takers of 1 (design §15.3). {@link #acquire()} and the timed {@code tryAcquire}s end the wait on
 * the server when the thread is interrupted, and then hold nothing: a grant that came meanwhile is
 * released again.
 *
 * <p><b>Lost replies.</b> Every acquisition and release carries a fresh request id ({@code REQUEST
 * id ttl}); when its reply is lost it is sent once more with the same id and the server answers
 * from its latch, so permits are never taken or given back twice. The latches are deleted in the
 * {@code DEL} pipelined with this object's next release, or expire.
 *
 * <p><b>Replica sync</b> applies to acquisitions as to the locks': permits the replicas did not
 * acknowledge are given back and {@link NotSyncedException} thrown.
 */
public final class DistributedSemaphore {
    private final Client client;
    private final String name;
    private final Exchange exchange;
    /**
     * Latches whose replies came, for the next release's {@code DEL}: the acquisitions' and the
     * releases'. A release's own latch joins only once its reply came, so that no other thread's
     * release deletes it while its resend may still need it.
     */
    private final Latches latches = new Latches();

    /**
     * The semaphore {@code name}.
     *
     * @param client the client
     * @param name the key of its count, as Redisson's {@code getSemaphore(name)}
     */
    public DistributedSemaphore(Client client, String name) {
        this.client = Objects.requireNonNull(client, "client");
        this.name = DistributedLock.checkName(name);
        this.exchange = new Exchange(this.client, name);
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
     * Takes a permit, waiting without limit on the server.
     *
     * @throws InterruptedException interrupted before or while waiting; nothing is taken
     * @throws NotSyncedException the replicas did not acknowledge it (given back)
     */
    public void acquire() throws InterruptedException {
        acquire(1);
    }

    /**
     * Takes {@code permits} at once, waiting without limit on the server.
     *
     * @param permits how many, 0 or more (0 returns at once)
     * @throws InterruptedException interrupted before or while waiting; nothing is taken
     */
    public void acquire(int permits) throws InterruptedException {
        Waiter.interruptibly(name, () -> take(permits, 0, true));
    }

    /**
     * Takes a permit, waiting without limit; an interrupt does not end the wait (the thread's
     * interrupt status stays set), as {@link java.util.concurrent.Semaphore#acquireUninterruptibly()}.
     */
    public void acquireUninterruptibly() {
        acquireUninterruptibly(1);
    }

    /**
     * Takes {@code permits} at once, waiting without limit; not interruptible.
     *
     * @param permits how many, 0 or more (0 returns at once)
     */
    public void acquireUninterruptibly(int permits) {
        take(permits, 0, false);
    }

    /**
     * Takes a permit if one is free now and nobody waits (one command, no wait).
     *
     * @return whether it was taken
     */
    public boolean tryAcquire() {
        return tryAcquire(1);
    }

    /**
     * Takes {@code permits} if they are free now and nobody waits (one command, no wait).
     *
     * @param permits how many, 0 or more
     * @return whether they were taken
     */
    public boolean tryAcquire(int permits) {
        return take(permits, Plan.NO_BLOCK, false);
    }

    /**
     * Waits up to {@code wait} on the server for a permit.
     *
     * @param wait how long to wait; 0 tries once
     * @param unit its unit
     * @return whether it was taken before the wait ran out
     * @throws InterruptedException interrupted before or while waiting; nothing is taken
     */
    public boolean tryAcquire(long wait, TimeUnit unit) throws InterruptedException {
        return tryAcquire(1, wait, unit);
    }

    /**
     * Waits up to {@code wait} on the server for {@code permits}, taken all at once.
     *
     * @param permits how many, 0 or more
     * @param wait how long to wait; 0 tries once
     * @param unit its unit
     * @return whether they were taken before the wait ran out
     * @throws InterruptedException interrupted before or while waiting; nothing is taken
     */
    public boolean tryAcquire(int permits, long wait, TimeUnit unit) throws InterruptedException {
        long waitMs = Durations.waitMs(wait, unit);
        return Waiter.interruptibly(name, () -> take(permits, waitMs == 0 ? Plan.NO_BLOCK : waitMs, true));
    }

    /**
     * One acquisition: {@code blockMs} {@link Plan#NO_BLOCK} tries once, 0 waits without limit;
     * an interrupt ends it only when {@code interruptible} (and then throws {@link Waiter.Ended}).
     */
    private boolean take(int permits, long blockMs, boolean interruptible) {
        checkPermits(permits);
        if (permits == 0) {
            return true;
        }
        String count = Integer.toString(permits);
        String request = UUID.randomUUID().toString();
        Exchange.Acquisition what = new Exchange.Acquisition() {
            @Override
            public List<String> command(long block) {
                List<String> args = new ArrayList<>(List.of("SEMAPHORE.ACQUIRE", name, count));
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
                return Plan.integer(reply) == 1;
            }

            @Override
            public List<String> undo(Object reply) {
                return List.of("SEMAPHORE.RELEASE", name, count);
            }
        };
        Exchange.Acquired got;
        try {
            got = exchange.acquire(what, null, true, blockMs, interruptible);
        } catch (Waiter.Cancelled cancelled) {
            giveBackAfterInterrupt(what, permits, request, cancelled);
            throw new Waiter.Ended(name);
        }
        got.link().close();
        boolean taken = what.granted(got.reply());
        if (taken) {
            latches.keep(Plan.acquisitionLatch(name, request), Plan.acquisitionLatchTtl(blockMs));
        }
        return taken;
    }

    /**
     * The wait was ended by an interrupt: permits the server granted at that moment are given back,
     * so that the interrupted call holds nothing ({@link Exchange#grantedDespiteInterrupt}: unlike a
     * lock's, a release of permits never taken would add permits).
     */
    private void giveBackAfterInterrupt(Exchange.Acquisition what, int permits, String request,
            Waiter.Cancelled cancelled) {
        try {
            if (exchange.grantedDespiteInterrupt(what, request, cancelled) != null) {
                latches.keep(Plan.acquisitionLatch(name, request), Plan.LATCH_TTL_MS);
                release(permits);
            }
        } catch (RuntimeException e) {
            // The server is unreachable: permits it granted, if any, stay taken (they have no
            // owner and no lease that could end them).
        }
    }

    // -- releases and the count -------------------------------------------------------------------

    /** Gives one permit back (anyone may: permits have no owner). */
    public void release() {
        release(1);
    }

    /**
     * Gives {@code permits} back and serves the waiters they cover, in order. Sent with a request
     * id, resent once after a connection error (answered from the server's latch, so given back
     * once), with the latches of earlier acquisitions and releases deleted in the same round trip.
     *
     * @param permits how many, 0 or more (0 sends nothing)
     */
    public void release(int permits) {
        checkPermits(permits);
        if (permits == 0) {
            return;
        }
        String request = UUID.randomUUID().toString();
        exchange.release(List.of("SEMAPHORE.RELEASE", name, Integer.toString(permits), "REQUEST", request,
                Long.toString(Plan.LATCH_TTL_MS)), true, latches.take());
        latches.keep(Plan.unlockLatch(name, request), Plan.LATCH_TTL_MS);
    }

    /**
     * Sets the count to {@code permits} if the semaphore has none yet, and serves the waiters.
     *
     * @param permits the count
     * @return whether it was set (false: a count exists)
     */
    public boolean trySetPermits(int permits) {
        return Plan.integer(exchange.call(List.of("SEMAPHORE.TRYSETPERMITS", name, Integer.toString(permits)))) == 1;
    }

    /**
     * Sets the count to {@code permits} if the semaphore has none yet, for {@code timeToLive}: the
     * semaphore's lifetime (acquisitions and releases keep it; {@link #addPermits} and {@link
     * #drainPermits} drop it, as Redisson's scripts do), as Redisson's {@code trySetPermits(permits,
     * timeToLive)}.
     *
     * @param permits the count
     * @param timeToLive how long the semaphore lasts, at least 1 ms
     * @return whether it was set (false: a count exists)
     */
    public boolean trySetPermits(int permits, Duration timeToLive) {
        long ttl = Durations.leaseMs(Objects.requireNonNull(timeToLive, "timeToLive"));
        return Plan.integer(exchange.call(List.of("SEMAPHORE.TRYSETPERMITS", name, Integer.toString(permits), "TTL",
                Long.toString(ttl)))) == 1;
    }

    /**
     * Adds {@code permits} to the count (a negative number takes them away, possibly below 0) and
     * serves the waiters.
     *
     * @param permits how many
     */
    public void addPermits(int permits) {
        exchange.call(List.of("SEMAPHORE.ADDPERMITS", name, Integer.toString(permits)));
    }

    /**
     * The free permits (0 when the semaphore has no count; negative after {@link #addPermits} took
     * more than were free).
     *
     * @return the count
     * @throws ArithmeticException the count is outside the {@code int} range
     */
    public int availablePermits() {
        return Math.toIntExact(Plan.integer(exchange.call(List.of("SEMAPHORE.AVAILABLE", name))));
    }

    /**
     * Takes every free permit at once.
     *
     * @return how many there were (0 when none)
     * @throws ArithmeticException the count was outside the {@code int} range (it is 0 now)
     */
    public int drainPermits() {
        return Math.toIntExact(Plan.integer(exchange.call(List.of("SEMAPHORE.DRAIN", name))));
    }

    private static void checkPermits(int permits) {
        if (permits < 0) {
            throw new IllegalArgumentException("permits cannot be negative: " + permits);
        }
    }

    @Override
    public String toString() {
        return "DistributedSemaphore(" + name + ")";
    }
}
