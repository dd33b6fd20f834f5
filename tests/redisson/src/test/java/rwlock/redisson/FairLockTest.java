package rwlock.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Collections;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import redis.clients.jedis.exceptions.JedisDataException;

/**
 * Redisson's {@code RFairLock} ({@code getFairLock}) and the module's {@code FAIRLOCK.*} on the
 * same names (issue 25): each refuses the other's hold, re-entry on both sides, one line in which
 * Redisson threads and module {@code BLOCK} waiters are served in the order they joined, handoffs
 * both ways (timed), the server telling Redisson's head waiter when a hold's lease runs out
 * (Redisson #3730), force unlock both ways, a timed-out wait of either side leaving no trace, and
 * Redisson's non-reentrant fair lock (4.4+) against {@code NOREENTRY}.
 */
class FairLockTest extends OneServer {
    /** Handoffs timed in each direction. */
    private static final int HANDOFFS = 50;
    /** A lease far longer than any prompt handoff: waking by TTL would show. */
    private static final long LEASE = 10_000;

    private static String queue(String name) {
        return Env.derived("redisson_lock_queue", name);
    }

    private static String timeouts(String name) {
        return Env.derived("redisson_lock_timeout", name);
    }

    /** The channel a Redisson fair waiter listens on: the lock's channel, then its owner. */
    private static String waiterChannel(String name, String owner) {
        return Env.derived("redisson_lock__channel", name) + ":" + owner;
    }

    /** FAIRLOCK.INFO's holders: owner → count. */
    private static Map<String, Long> holders(String name) {
        Map<String, Long> out = new LinkedHashMap<>();
        for (Object holder : (List<?>) Module.field((List<?>) raw.call("FAIRLOCK.INFO", name), "holders")) {
            out.put((String) Module.field((List<?>) holder, "owner"), (Long) Module.field((List<?>) holder, "count"));
        }
        return out;
    }

    /** FAIRLOCK.INFO's line: its owners, first first. */
    private static List<String> line(String name) {
        List<String> out = new ArrayList<>();
        for (Object entry : (List<?>) Module.field((List<?>) raw.call("FAIRLOCK.INFO", name), "line")) {
            out.add((String) Module.field((List<?>) entry, "owner"));
        }
        return out;
    }

    /** Whether {@code owner} is parked in the line (a module BLOCK waiter). */
    private static boolean parked(String name, String owner) {
        for (Object entry : (List<?>) Module.field((List<?>) raw.call("FAIRLOCK.INFO", name), "line")) {
            List<?> e = (List<?>) entry;
            if (owner.equals(Module.field(e, "owner"))) {
                return Long.valueOf(1).equals(Module.field(e, "parked"));
            }
        }
        return false;
    }

    /** Nothing of the lock is left: no hash, no line, no deadlines. */
    private static void noTrace(String name) {
        assertEquals(0L, raw.call("EXISTS", name, queue(name), timeouts(name)), "keys left for " + name);
    }

    private static String ownerOf(Env.JavaThread thread) throws Exception {
        return redisson.getId() + ":" + thread.run(() -> Thread.currentThread().getId());
    }

    /** Waits until a Redisson thread is in the line and listening on its channel. */
    private static void awaitRedissonWaiting(String name, String owner) throws InterruptedException {
        Env.await("Redisson " + owner + " in line on " + name, 5_000,
                () -> line(name).contains(owner) && Env.subscribers(raw, waiterChannel(name, owner)) > 0);
    }

    private static void awaitParked(String name, String owner) throws InterruptedException {
        Env.await("module " + owner + " parked on " + name, 5_000, () -> parked(name, owner));
    }

    @Test
    void eachSideRefusesTheOthersHold() throws Exception {
        String name = "fair-refuse";
        RLock lock = redisson.getFairLock(name);
        String owner = Env.moduleOwner(redisson);
        String me = redisson.getId() + ":" + Thread.currentThread().getId();
        lock.lock(LEASE, TimeUnit.MILLISECONDS);
        assertEquals(Map.of(me, 1L), holders(name), "FAIRLOCK.INFO reads Redisson's hold");
        assertEquals(1L, raw.call("FAIRLOCK.ACQUIRE", name, owner, "5000", "NOQUEUE"), "NOQUEUE refused");
        long t0 = System.nanoTime();
        Object blocked = raw.callBlocking("FAIRLOCK.ACQUIRE", name, owner, "5000", "BLOCK", "150");
        long waited = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
        assertInstanceOf(Long.class, blocked);
        assertTrue((Long) blocked > 0 && (Long) blocked <= LEASE, "the lock's PTTL: " + blocked);
        assertTrue(waited >= 140, "BLOCK 150 returned after " + waited + " ms");
        assertEquals(List.of(), line(name), "the timed-out module waiter left the line");
        lock.unlock();
        noTrace(name);

        long acquired = System.nanoTime();
        assertNull(raw.call("FAIRLOCK.ACQUIRE", name, owner, String.valueOf(LEASE)));
        assertFalse(lock.tryLock(), "tryLock() on a module hold");
        assertFalse(lock.tryLock(0, LEASE, TimeUnit.MILLISECONDS), "tryLock(0, …) on a module hold");
        assertTrue(lock.isLocked());
        assertFalse(lock.isHeldByCurrentThread());
        long remain = lock.remainTimeToLive();
        long least = Env.leastTtlLeft(LEASE, acquired);
        assertTrue(remain >= least && remain <= LEASE, "remainTimeToLive " + remain + ", least " + least);
        assertEquals(Map.of(owner, 1L), holders(name), "Redisson's attempts changed nothing");
        assertEquals(List.of(), line(name), "and left no waiter");
        assertEquals(1L, raw.call("FAIRLOCK.UNLOCK", name, owner));
        noTrace(name);
    }

    @Test
    void reentryOnBothSides() throws Exception {
        String name = "fair-reentry";
        RLock lock = redisson.getFairLock(name);
        String me = redisson.getId() + ":" + Thread.currentThread().getId();
        String owner = Env.moduleOwner(redisson);
        for (int i = 1; i <= 3; i++) {
            lock.lock(LEASE, TimeUnit.MILLISECONDS);
            assertEquals(i, lock.getHoldCount());
            assertEquals(Map.of(me, (long) i), holders(name));
        }
        assertEquals(1L, raw.call("FAIRLOCK.ACQUIRE", name, owner, "1000", "NOQUEUE"));
        lock.unlock();
        lock.unlock();
        assertEquals(Map.of(me, 1L), holders(name));
        lock.unlock();
        noTrace(name);
        for (int i = 1; i <= 3; i++) {
            assertNull(raw.call("FAIRLOCK.ACQUIRE", name, owner, String.valueOf(LEASE)), "module re-entry " + i);
            assertEquals(Map.of(owner, (long) i), holders(name));
            assertFalse(lock.tryLock());
        }
        assertEquals(0L, raw.call("FAIRLOCK.UNLOCK", name, owner));
        assertEquals(0L, raw.call("FAIRLOCK.UNLOCK", name, owner));
        assertFalse(lock.tryLock(), "one module hold left");
        assertEquals(1L, raw.call("FAIRLOCK.UNLOCK", name, owner));
        assertTrue(lock.tryLock());
        lock.unlock();
        noTrace(name);
    }

    /**
     * Redisson threads and module BLOCK waiters join one line alternately while a module owner
     * holds the lock; each, when served, records itself, holds a moment, and releases (Redisson's
     * unlock or FAIRLOCK.UNLOCK), which serves the next. The grants come in join order.
     */
    @Test
    void oneLineServesBothSidesInJoinOrder() throws Exception {
        String name = "fair-line";
        int waiters = 8;
        RLock lock = redisson.getFairLock(name);
        String holder = Env.moduleOwner(redisson);
        assertNull(raw.call("FAIRLOCK.ACQUIRE", name, holder, "20000"));
        List<String> joined = new ArrayList<>();
        List<String> granted = Collections.synchronizedList(new ArrayList<>());
        List<Env.JavaThread> threads = new ArrayList<>();
        List<Raw> conns = new ArrayList<>();
        ExecutorService moduleThreads = Executors.newFixedThreadPool(waiters);
        List<Future<?>> done = new ArrayList<>();
        try {
            for (int i = 0; i < waiters; i++) {
                String label = (i % 2 == 0 ? "redisson-" : "module-") + i;
                if (i % 2 == 0) {
                    Env.JavaThread thread = new Env.JavaThread();
                    threads.add(thread);
                    String owner = ownerOf(thread);
                    done.add(thread.submit(() -> {
                        lock.lock(LEASE, TimeUnit.MILLISECONDS);
                        granted.add(label);
                        Thread.sleep(5);
                        lock.unlock();
                        return null;
                    }));
                    awaitRedissonWaiting(name, owner);
                } else {
                    Raw conn = new Raw(server.port);
                    conns.add(conn);
                    String owner = Env.moduleOwner(redisson);
                    done.add(moduleThreads.submit(() -> {
                        assertNull(conn.callBlocking("FAIRLOCK.ACQUIRE", name, owner, String.valueOf(LEASE), "BLOCK", "20000"));
                        granted.add(label);
                        Thread.sleep(5);
                        assertEquals(1L, conn.call("FAIRLOCK.UNLOCK", name, owner));
                        return null;
                    }));
                    awaitParked(name, owner);
                }
                joined.add(label);
                assertEquals(i + 1, line(name).size(), "line after " + label + " joined: " + line(name));
            }
            assertEquals(1L, raw.call("FAIRLOCK.UNLOCK", name, holder));
            for (Future<?> f : done) {
                f.get(30, TimeUnit.SECONDS);
            }
        } finally {
            moduleThreads.shutdownNow();
            threads.forEach(Env.JavaThread::close);
            conns.forEach(Raw::close);
        }
        assertEquals(joined, granted, "grants in join order");
        noTrace(name);
        Env.record("fair line", waiters + " waiters (Redisson and module BLOCK alternately) served in join order");
    }

    /** RFairLock as both sides take it. */
    private static final Kind FAIR = new Kind(name -> redisson.getFairLock(name), "FAIRLOCK.ACQUIRE",
            "FAIRLOCK.UNLOCK", FairLockTest::holders);

    @Test
    void handoffModuleToRedisson() throws Exception {
        List<Double> samples = handoffsModuleToRedisson(FAIR, "fair-m2r-", HANDOFFS, LEASE,
                FairLockTest::awaitRedissonWaiting, (name, owner) -> noTrace(name));
        Env.record("handoff module->Redisson (RFairLock)", Env.summary(samples));
        assertTrue(Env.percentile(samples, 99) < Env.HANDOFF_MS, "a Redisson fair waiter must wake on FAIRLOCK.UNLOCK's message: "
                + Env.summary(samples));
    }

    @Test
    void handoffRedissonToModule() throws Exception {
        List<Double> samples = handoffsRedissonToModule(FAIR, "fair-r2m-", HANDOFFS, LEASE,
                FairLockTest::awaitParked, (name, owner) -> noTrace(name));
        Env.record("handoff Redisson->module (RFairLock)", Env.summary(samples));
        assertTrue(Env.percentile(samples, 99) < Env.HANDOFF_MS, "a BLOCK waiter must be served on Redisson's fair unlock: "
                + Env.summary(samples));
    }

    /**
     * Redisson #3730: a holder's lease runs out while a Redisson thread waits in lock(); Redisson's
     * scripts publish nothing then, so the waiter sleeps the ttl it was told. Here the module hold
     * is taken with a 10 s lease (the ttl Redisson's waiter is told), then cut to 300 ms with
     * LOCK.RENEW (a watchdog renewing with a shorter lease); a module BLOCK waiter stands behind the
     * Redisson thread, as in a line both kinds share. The module hears the expiry and publishes on
     * the head's channel, so Redisson takes the lock soon after the expiry, then hands it on.
     */
    @Test
    void anExpiredHoldWakesRedissonsHeadWaiter() throws Exception {
        List<Double> samples = new ArrayList<>();
        String owner = Env.moduleOwner(redisson);
        String behind = Env.moduleOwner(redisson);
        long cut = 300;
        ExecutorService moduleThread = Executors.newSingleThreadExecutor();
        try (Env.JavaThread waiter = new Env.JavaThread(); Raw behindConn = new Raw(server.port)) {
            String redissonOwner = ownerOf(waiter);
            for (int i = 0; i < 5; i++) {
                String name = "fair-3730-" + i;
                RLock lock = redisson.getFairLock(name);
                assertNull(raw.call("FAIRLOCK.ACQUIRE", name, owner, String.valueOf(LEASE)));
                raw.call("CONFIG", "RESETSTAT");
                Future<Long> acquired = waiter.submit(() -> {
                    lock.lock(LEASE, TimeUnit.MILLISECONDS);
                    return System.nanoTime();
                });
                awaitRedissonWaiting(name, redissonOwner);
                awaitSleeping();
                Future<Object> next = moduleThread.submit(() ->
                        behindConn.callBlocking("FAIRLOCK.ACQUIRE", name, behind, String.valueOf(LEASE), "BLOCK", "30000"));
                awaitParked(name, behind);
                assertEquals(List.of(redissonOwner, behind), line(name));
                long t0 = System.nanoTime();
                assertEquals(1L, raw.call("LOCK.RENEW", name, owner, String.valueOf(cut)));
                long expiry = t0 + TimeUnit.MILLISECONDS.toNanos(cut);
                long got = acquired.get(LEASE + 5_000, TimeUnit.MILLISECONDS);
                samples.add((got - expiry) / 1e6);
                assertTrue(waiter.run(lock::isHeldByCurrentThread));
                waiter.run(() -> {
                    lock.unlock();
                    return null;
                });
                assertNull(next.get(5, TimeUnit.SECONDS), "the module waiter behind is served next");
                assertEquals(1L, raw.call("FAIRLOCK.UNLOCK", name, behind));
                noTrace(name);
            }
        } finally {
            moduleThread.shutdownNow();
        }
        Env.record("lease ran out, Redisson head waiter told (#3730)", "acquired after the expiry: " + Env.summary(samples)
                + " (the ttl it slept on was " + LEASE + " ms)");
        assertTrue(Collections.max(samples) < Env.HANDOFF_MS, "Redisson's waiter must take the lock within "
                + Env.HANDOFF_MS + " ms of the expiry, not after its " + LEASE + " ms sleep: " + Env.summary(samples));
    }

    /**
     * The same expiry on a fresh server, the hold a module client's (FAIRLOCK.ACQUIRE, taken at
     * once) and the line one Redisson thread, no module waiter ever queued: the module hears keys
     * expire from load on, so Redisson's head is told and takes the lock well before the ttl it
     * sleeps on (10 s) would end.
     */
    @Test
    void redissonWaitersAloneAreToldOfTheExpiry() throws Exception {
        // The hold outlasts what a fresh (cold) Redisson client on a loaded machine takes to try,
        // subscribe and try again (a 2 s hold could run out first: no wait, nothing shown), and
        // keeps the ttl sleep far from a prompt wake-up. The test lasts about the cut, not this.
        long lease = LEASE;
        long cut = 300;
        try (Servers.Server fresh = Servers.start(false); Raw conn = new Raw(fresh.port);
             Env.JavaThread waiter = new Env.JavaThread()) {
            RedissonClient other = Env.redisson(fresh, 1_000);
            try {
                String name = "fair-3730-fresh";
                RLock lock = other.getFairLock(name);
                String owner = Env.moduleOwner(other);
                String waiterOwner = other.getId() + ":" + waiter.run(() -> Thread.currentThread().getId());
                assertNull(conn.call("FAIRLOCK.ACQUIRE", name, owner, String.valueOf(lease)));
                conn.call("CONFIG", "RESETSTAT");
                Future<Long> acquired = waiter.submit(() -> {
                    lock.lock(lease, TimeUnit.MILLISECONDS);
                    return System.nanoTime();
                });
                Env.await("Redisson waiting", lease - 2_000,
                        () -> Env.subscribers(conn, waiterChannel(name, waiterOwner)) > 0 && Env.scriptCalls(conn) >= 2);
                Thread.sleep(50);
                long t0 = System.nanoTime();
                assertEquals(1L, conn.call("LOCK.RENEW", name, owner, String.valueOf(cut)));
                double ms = (acquired.get(lease + 5_000, TimeUnit.MILLISECONDS) - t0 - TimeUnit.MILLISECONDS.toNanos(cut)) / 1e6;
                assertTrue(waiter.run(lock::isHeldByCurrentThread));
                assertTrue(ms < Env.HANDOFF_MS, "within " + Env.HANDOFF_MS + " ms of the expiry, not after its "
                        + lease + " ms sleep: " + ms + " ms");
                waiter.run(() -> {
                    lock.unlock();
                    return null;
                });
                Env.record("lease ran out, fresh server, no module waiter ever queued", String.format(Locale.ROOT,
                        "Redisson's head took the lock %.0f ms after the expiry (its ttl sleep was %d ms)", ms, lease));
            } finally {
                other.shutdown();
            }
        }
    }

    /** Waits until the Redisson thread that just called lock() sleeps on the ttl of its second try. */
    private static void awaitSleeping() throws InterruptedException {
        // lock() runs its script once, subscribes, runs it once more and only then sleeps the ttl
        // it got: cut the lease after the second run, or the waiter could be told the short PTTL
        // and wake by itself.
        Env.await("Redisson's second try", 5_000, () -> Env.scriptCalls(raw) >= 2);
        Thread.sleep(50);
    }

    @Test
    void forceUnlockBothWays() throws Exception {
        String name = "fair-force";
        RLock lock = redisson.getFairLock(name);
        String owner = Env.moduleOwner(redisson);
        // Redisson forces a module hold open, and its own waiter is served.
        assertNull(raw.call("FAIRLOCK.ACQUIRE", name, owner, String.valueOf(LEASE)));
        try (Env.JavaThread waiter = new Env.JavaThread()) {
            String redissonOwner = ownerOf(waiter);
            Future<Long> acquired = waiter.submit(() -> {
                lock.lock(LEASE, TimeUnit.MILLISECONDS);
                return System.nanoTime();
            });
            awaitRedissonWaiting(name, redissonOwner);
            long t0 = System.nanoTime();
            assertTrue(lock.forceUnlock(), "Redisson's forceUnlock deletes a module hold");
            double ms = (acquired.get(5, TimeUnit.SECONDS) - t0) / 1e6;
            assertTrue(ms < Env.HANDOFF_MS, "the head woke " + ms + " ms after forceUnlock");
            assertEquals(Map.of(redissonOwner, 1L), holders(name));
            assertEquals(null, raw.call("FAIRLOCK.UNLOCK", name, owner), "the module owner holds nothing now");

            // The module forces Redisson's hold open, and its BLOCK waiter is served.
            ExecutorService moduleThread = Executors.newSingleThreadExecutor();
            try (Raw other = new Raw(server.port)) {
                Future<Object[]> module = moduleThread.submit(() -> {
                    Object reply = other.callBlocking("FAIRLOCK.ACQUIRE", name, owner, String.valueOf(LEASE), "BLOCK", "5000");
                    return new Object[] {reply, System.nanoTime()};
                });
                awaitParked(name, owner);
                long t1 = System.nanoTime();
                assertEquals(1L, raw.call("FAIRLOCK.FORCEUNLOCK", name));
                Object[] got = module.get(5, TimeUnit.SECONDS);
                assertNull(got[0]);
                double ms2 = ((Long) got[1] - t1) / 1e6;
                assertTrue(ms2 < Env.HANDOFF_MS, "the module waiter woke " + ms2 + " ms after FAIRLOCK.FORCEUNLOCK");
                assertFalse(waiter.run(lock::isHeldByCurrentThread));
                assertEquals(Map.of(owner, 1L), holders(name));
            } finally {
                moduleThread.shutdownNow();
            }
        }
        assertEquals(1L, raw.call("FAIRLOCK.UNLOCK", name, owner));
        assertEquals(0L, raw.call("FAIRLOCK.FORCEUNLOCK", name));
        noTrace(name);
    }

    /**
     * A wait that runs out leaves nothing behind: Redisson's tryLock(wait) (its
     * fair_acquire_failed script) and a module BLOCK (FAIRLOCK.CANCEL's steps), alone and behind
     * a waiter of the other side, whose place and deadline stay as they were.
     */
    @Test
    void aTimedOutWaitLeavesNoTrace() throws Exception {
        String name = "fair-timeout";
        RLock lock = redisson.getFairLock(name);
        String owner = Env.moduleOwner(redisson);
        assertNull(raw.call("FAIRLOCK.ACQUIRE", name, owner, String.valueOf(LEASE)));
        long t0 = System.nanoTime();
        assertFalse(lock.tryLock(300, LEASE, TimeUnit.MILLISECONDS));
        assertTrue(System.nanoTime() - t0 >= TimeUnit.MILLISECONDS.toNanos(290));
        assertEquals(List.of(), line(name));
        assertEquals(0L, raw.call("EXISTS", queue(name), timeouts(name)), "Redisson's timed-out wait left the line");
        assertEquals(1L, raw.call("FAIRLOCK.UNLOCK", name, owner));
        noTrace(name);

        try (Env.JavaThread holder = new Env.JavaThread(); Env.JavaThread late = new Env.JavaThread();
             Raw waiterConn = new Raw(server.port)) {
            holder.run(() -> {
                lock.lock(LEASE, TimeUnit.MILLISECONDS);
                return null;
            });
            assertInstanceOf(Long.class, raw.callBlocking("FAIRLOCK.ACQUIRE", name, owner, "5000", "BLOCK", "200"));
            assertEquals(0L, raw.call("EXISTS", queue(name), timeouts(name)), "the module's timed-out wait left the line");

            // A module waiter first, then a Redisson thread that gives up: the module waiter keeps
            // its place and deadline, and is served at Redisson's unlock.
            ExecutorService moduleThread = Executors.newSingleThreadExecutor();
            try {
                Future<Object> module = moduleThread.submit(() ->
                        waiterConn.callBlocking("FAIRLOCK.ACQUIRE", name, owner, String.valueOf(LEASE), "BLOCK", "10000"));
                awaitParked(name, owner);
                String deadline = String.valueOf(raw.call("ZSCORE", timeouts(name), owner));
                String lateOwner = ownerOf(late);
                assertFalse(late.run(() -> lock.tryLock(300, LEASE, TimeUnit.MILLISECONDS)));
                assertEquals(List.of(owner), line(name), "only the module waiter is left");
                assertNull(raw.call("ZSCORE", timeouts(name), lateOwner), "no deadline left for Redisson's thread");
                String after = String.valueOf(raw.call("ZSCORE", timeouts(name), owner));
                assertTrue(Double.parseDouble(after) >= Double.parseDouble(deadline),
                        "the module waiter's deadline did not move back: " + deadline + " -> " + after);
                holder.run(() -> {
                    lock.unlock();
                    return null;
                });
                assertNull(module.get(5, TimeUnit.SECONDS), "the module waiter is served at Redisson's unlock");
            } finally {
                moduleThread.shutdownNow();
            }
        }
        assertEquals(1L, raw.call("FAIRLOCK.UNLOCK", name, owner));
        noTrace(name);
    }

    private static RLock nonReentrantFair(String name) throws Exception {
        return (RLock) RedissonClient.class.getMethod("getNonReentrantFairLock", String.class).invoke(redisson, name);
    }

    @Test
    void nonReentrantFairLockBothWays() throws Exception {
        Env.requireVersion(Env.NONREENTRANT_SINCE, "non-reentrant fair lock");
        String name = "fair-noreentry";
        RLock lock = nonReentrantFair(name);
        String me = redisson.getId() + ":" + Thread.currentThread().getId();
        String owner = Env.moduleOwner(redisson);
        lock.lock(LEASE, TimeUnit.MILLISECONDS);
        IllegalMonitorStateException again = assertThrows(IllegalMonitorStateException.class,
                () -> lock.tryLock(0, LEASE, TimeUnit.MILLISECONDS), "Redisson refuses its own re-entry");
        assertEquals(Map.of(me, 1L), holders(name), "the refused re-entry changed nothing");
        assertEquals(1L, raw.call("FAIRLOCK.ACQUIRE", name, owner, "5000", "NOQUEUE", "NOREENTRY"));
        lock.unlock();
        noTrace(name);

        assertNull(raw.call("FAIRLOCK.ACQUIRE", name, owner, String.valueOf(LEASE), "NOREENTRY"));
        JedisDataException error = assertThrows(JedisDataException.class,
                () -> raw.callBlocking("FAIRLOCK.ACQUIRE", name, owner, String.valueOf(LEASE), "NOREENTRY", "BLOCK", "3000"));
        assertTrue(error.getMessage().startsWith("NON_REENTRANT_REACQUIRE"), error.getMessage());
        assertEquals(Map.of(owner, 1L), holders(name));
        assertEquals(List.of(), line(name), "the refused re-entry did not join the line");
        try (Env.JavaThread javaThread = new Env.JavaThread(); Raw waiterConn = new Raw(server.port)) {
            String redissonOwner = ownerOf(javaThread);
            Future<Long> redissonGot = javaThread.submit(() -> {
                lock.lock(LEASE, TimeUnit.MILLISECONDS);
                return System.nanoTime();
            });
            awaitRedissonWaiting(name, redissonOwner);
            long t0 = System.nanoTime();
            assertEquals(1L, raw.call("FAIRLOCK.UNLOCK", name, owner));
            assertTrue((redissonGot.get(5, TimeUnit.SECONDS) - t0) / 1e6 < Env.HANDOFF_MS, "woken by the message");
            ExecutorService moduleThread = Executors.newSingleThreadExecutor();
            try {
                Future<Object> moduleGot = moduleThread.submit(() -> waiterConn.callBlocking("FAIRLOCK.ACQUIRE", name, owner,
                        String.valueOf(LEASE), "NOREENTRY", "BLOCK", "5000"));
                awaitParked(name, owner);
                javaThread.run(() -> {
                    lock.unlock();
                    return null;
                });
                assertNull(moduleGot.get(5, TimeUnit.SECONDS));
            } finally {
                moduleThread.shutdownNow();
            }
        }
        assertEquals(1L, raw.call("FAIRLOCK.UNLOCK", name, owner));
        noTrace(name);
        Env.record("non-reentrant fair lock", String.format(Locale.ROOT,
                "Redisson: %s; module: %s", again.getClass().getSimpleName(), error.getMessage()));
    }
}
