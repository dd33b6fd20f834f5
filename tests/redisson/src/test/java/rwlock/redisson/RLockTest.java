package rwlock.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.redisson.api.RFuture;
import org.redisson.api.RLock;

/**
 * Redisson's RLock ({@code getLock}) and the module's LOCK.* on the same
 * names: refusals, re-entry, Redisson's introspection of module holds, force
 * unlock, handoff both ways (timed), the watchdog, and the unlock latch.
 */
class RLockTest extends OneServer {
    /** Handoffs timed in each direction. */
    private static final int HANDOFFS = 100;
    /** A lease far longer than any prompt handoff: waking by TTL would show. */
    private static final long LEASE = 10_000;

    private static String redissonOwner() {
        return redisson.getId() + ":" + Thread.currentThread().getId();
    }

    @Test
    void aRedissonHoldRefusesTheModuleWithItsPttl() throws Exception {
        RLock lock = redisson.getLock("rlock-refuse-1");
        long locked = System.nanoTime();
        lock.lock(LEASE, TimeUnit.MILLISECONDS);
        String owner = Env.moduleOwner(redisson);
        Object reply = raw.call("LOCK.ACQUIRE", "rlock-refuse-1", owner, "5000");
        long after = raw.pttl("rlock-refuse-1");
        long least = Env.leastTtlLeft(LEASE, locked);
        assertInstanceOf(Long.class, reply, "a Redisson hold must refuse LOCK.ACQUIRE with the PTTL");
        long pttl = (Long) reply;
        assertTrue(pttl >= after && pttl <= LEASE && pttl >= least, "PTTL " + pttl + " vs " + after + ", least " + least);
        assertEquals(Map.of(redissonOwner(), 1L), Module.holders(raw, "rlock-refuse-1"));
        // Waiting a bounded time ends with the PTTL, the lock untouched.
        long t0 = System.nanoTime();
        Object blocked = raw.callBlocking("LOCK.ACQUIRE", "rlock-refuse-1", owner, "5000", "BLOCK", "150");
        long waited = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0);
        assertInstanceOf(Long.class, blocked);
        assertTrue(waited >= 140, "BLOCK 150 returned after " + waited + " ms");
        lock.unlock();
        assertNull(raw.call("LOCK.ACQUIRE", "rlock-refuse-1", owner, "5000"), "free after Redisson's unlock");
        assertEquals(1L, raw.call("LOCK.UNLOCK", "rlock-refuse-1", owner));
    }

    @Test
    void aModuleHoldMakesTryLockFailAndReadsRight() throws Exception {
        String name = "rlock-refuse-2";
        String owner = Env.moduleOwner(redisson);
        long acquired = System.nanoTime();
        assertNull(raw.call("LOCK.ACQUIRE", name, owner, String.valueOf(LEASE)));
        RLock lock = redisson.getLock(name);
        assertFalse(lock.tryLock(0, 5, TimeUnit.SECONDS), "tryLock(0, …) must fail on a module hold");
        assertTrue(lock.isLocked());
        assertFalse(lock.isHeldByCurrentThread());
        assertEquals(0, lock.getHoldCount(), "Redisson's hold count is its own thread's: none");
        long remain = lock.remainTimeToLive();
        long pttl = raw.pttl(name);
        long least = Env.leastTtlLeft(LEASE, acquired);
        assertTrue(remain >= pttl && remain <= LEASE && remain >= least,
                "remainTimeToLive " + remain + " vs PTTL " + pttl + ", least " + least);
        // A short wait ends false too, after about the wait.
        long t0 = System.nanoTime();
        assertFalse(lock.tryLock(200, 5_000, TimeUnit.MILLISECONDS));
        assertTrue(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - t0) >= 190);
        assertEquals(Map.of(owner, 1L), Module.holders(raw, name), "Redisson's attempts changed nothing");
        assertEquals(1L, raw.call("LOCK.UNLOCK", name, owner));
        assertFalse(lock.isLocked());
        assertEquals(-2L, lock.remainTimeToLive());
    }

    @Test
    void reentryOnBothSides() throws Exception {
        String name = "rlock-reentry";
        RLock lock = redisson.getLock(name);
        for (int i = 1; i <= 3; i++) {
            lock.lock(LEASE, TimeUnit.MILLISECONDS);
            assertEquals(i, lock.getHoldCount());
            assertEquals(Map.of(redissonOwner(), (long) i), Module.holders(raw, name), "LOCK.INFO reads Redisson's count");
        }
        String owner = Env.moduleOwner(redisson);
        assertInstanceOf(Long.class, raw.call("LOCK.ACQUIRE", name, owner, "1000"));
        lock.unlock();
        lock.unlock();
        assertEquals(Map.of(redissonOwner(), 1L), Module.holders(raw, name));
        assertTrue(lock.isHeldByCurrentThread());
        lock.unlock();
        assertFalse(lock.isLocked());
        for (int i = 1; i <= 3; i++) {
            assertNull(raw.call("LOCK.ACQUIRE", name, owner, String.valueOf(LEASE)), "module re-entry " + i);
            assertEquals(Map.of(owner, (long) i), Module.holders(raw, name));
            assertFalse(lock.tryLock(0, 5, TimeUnit.SECONDS));
        }
        assertEquals(0L, raw.call("LOCK.UNLOCK", name, owner));
        assertEquals(0L, raw.call("LOCK.UNLOCK", name, owner));
        assertFalse(lock.tryLock(0, 5, TimeUnit.SECONDS), "one module hold left");
        assertEquals(1L, raw.call("LOCK.UNLOCK", name, owner));
        assertTrue(lock.tryLock(0, 5, TimeUnit.SECONDS));
        lock.unlock();
    }

    @Test
    void forceUnlockBothWays() throws Exception {
        String name = "rlock-force";
        RLock lock = redisson.getLock(name);
        String owner = Env.moduleOwner(redisson);
        assertNull(raw.call("LOCK.ACQUIRE", name, owner, String.valueOf(LEASE)));
        assertTrue(lock.forceUnlock(), "Redisson's forceUnlock deletes a module hold");
        assertFalse(lock.isLocked());
        assertEquals(Map.of(), Module.holders(raw, name));
        assertEquals(null, raw.call("LOCK.UNLOCK", name, owner), "the module owner holds nothing now");

        try (Env.JavaThread holder = new Env.JavaThread()) {
            holder.run(() -> {
                lock.lock(LEASE, TimeUnit.MILLISECONDS);
                return null;
            });
            assertEquals(1L, raw.call("LOCK.FORCEUNLOCK", name), "LOCK.FORCEUNLOCK deletes a Redisson hold");
            assertFalse(holder.run(lock::isHeldByCurrentThread));
            assertFalse(lock.isLocked());
            assertEquals(0L, raw.call("LOCK.FORCEUNLOCK", name));
        }

        // A force unlock wakes the other side's waiter at once.
        assertNull(raw.call("LOCK.ACQUIRE", name, owner, String.valueOf(LEASE)));
        try (Env.JavaThread waiter = new Env.JavaThread()) {
            Future<Long> acquired = waiter.submit(() -> {
                lock.lock(LEASE, TimeUnit.MILLISECONDS);
                return System.nanoTime();
            });
            Env.await("Redisson subscribed", 5_000, () -> Env.subscribers(raw, "redisson_lock__channel:{" + name + "}") > 0);
            long t0 = System.nanoTime();
            assertEquals(1L, raw.call("LOCK.FORCEUNLOCK", name));
            double ms = (acquired.get(5, TimeUnit.SECONDS) - t0) / 1e6;
            assertTrue(ms < Env.HANDOFF_MS, "Redisson woke " + ms + " ms after LOCK.FORCEUNLOCK");
            // Now Redisson holds it; a module waiter is served when Redisson forces it free.
            ExecutorService moduleThread = Executors.newSingleThreadExecutor();
            try (Raw other = new Raw(server.port)) {
                Future<Object[]> module = moduleThread.submit(() -> {
                    Object reply = other.callBlocking("LOCK.ACQUIRE", name, owner, String.valueOf(LEASE), "BLOCK", "5000");
                    return new Object[] {reply, System.nanoTime()};
                });
                Env.await("module waiter blocked", 5_000, () -> Env.blockedClients(raw) > 0);
                long t1 = System.nanoTime();
                assertTrue(lock.forceUnlock());
                Object[] got = module.get(5, TimeUnit.SECONDS);
                assertNull(got[0], "the module waiter takes the lock after Redisson's forceUnlock");
                double ms2 = ((Long) got[1] - t1) / 1e6;
                assertTrue(ms2 < Env.HANDOFF_MS, "module woke " + ms2 + " ms after forceUnlock");
                assertFalse(waiter.run(lock::isHeldByCurrentThread));
            } finally {
                moduleThread.shutdownNow();
            }
        }
        assertEquals(1L, raw.call("LOCK.UNLOCK", name, owner));
    }

    /** RLock as both sides take it. */
    private static final Kind RLOCK = new Kind(name -> redisson.getLock(name), "LOCK.ACQUIRE", "LOCK.UNLOCK",
            name -> Module.holders(raw, name));

    @Test
    void handoffModuleToRedisson() throws Exception {
        List<Double> samples = handoffsModuleToRedisson(RLOCK, "rlock-m2r-", HANDOFFS, LEASE, (name, owner) -> {
            Env.await("Redisson waiting on " + name, 5_000,
                    () -> Env.subscribers(raw, "redisson_lock__channel:{" + name + "}") > 0);
            Thread.sleep(2);
        }, (name, owner) -> { });
        Env.record("handoff module->Redisson (RLock)", Env.summary(samples));
        assertTrue(Env.percentile(samples, 99) < Env.HANDOFF_MS, "a Redisson waiter must wake on the module's message: "
                + Env.summary(samples));
    }

    @Test
    void handoffRedissonToModule() throws Exception {
        List<Double> samples = handoffsRedissonToModule(RLOCK, "rlock-r2m-", HANDOFFS, LEASE,
                (name, owner) -> Env.await("module waiter blocked", 5_000, () -> Env.blockedClients(raw) > 0),
                (name, owner) -> { });
        Env.record("handoff Redisson->module (RLock)", Env.summary(samples));
        assertTrue(Env.percentile(samples, 99) < Env.HANDOFF_MS, "a BLOCK waiter must be served on Redisson's release: "
                + Env.summary(samples));
    }

    @Test
    void theWatchdogKeepsTheLockWhileTheModuleIsRefused() throws Exception {
        String name = "rlock-watchdog";
        RLock lock = redisson.getLock(name);
        String owner = Env.moduleOwner(redisson);
        lock.lock(); // no lease: the 1 s watchdog timeout, renewed by Redisson
        long pttl = raw.pttl(name);
        assertTrue(pttl > 0 && pttl <= 1_000, "lease is the watchdog timeout, PTTL " + pttl);
        long start = System.nanoTime();
        int refusals = 0;
        long minPttl = Long.MAX_VALUE;
        while (System.nanoTime() - start < TimeUnit.MILLISECONDS.toNanos(3_500)) {
            Object reply = raw.call("LOCK.ACQUIRE", name, owner, "1000");
            assertInstanceOf(Long.class, reply, "the module took a lock Redisson's watchdog keeps");
            minPttl = Math.min(minPttl, (Long) reply);
            refusals++;
            Thread.sleep(50);
        }
        assertTrue(lock.isHeldByCurrentThread());
        // A lapse would show in the next refusal (the module takes the free lock) or here (Redisson
        // never takes it back); the count only says the 3.5 s were probed throughout: a probe every
        // half second on average, ten times the 50 ms pause, which a loaded machine still makes.
        assertTrue(refusals >= 7, "refusals " + refusals);
        Env.record("watchdog RLock", "held 3.5 s on a 1 s lease, module refused " + refusals
                + " times, lowest PTTL seen " + minPttl + " ms");
        lock.unlock();
        assertNull(raw.call("LOCK.ACQUIRE", name, owner, "1000"));
        assertEquals(1L, raw.call("LOCK.UNLOCK", name, owner));
    }

    /**
     * Redisson 3.24+ sends each unlock with a request id and keeps its reply
     * under redisson_unlock_latch:{lock}:id while it may retry. The retry is
     * Redisson's own method (unlockInnerAsync with the same id), called here
     * directly with a chosen id; the module's LOCK.UNLOCK … REQUEST takes the
     * other side. The owner is Redisson's: a retry is by the same owner.
     */
    @Test
    void theUnlockLatchAgreesWithLockUnlockRequest() throws Exception {
        Env.requireVersion(Env.LATCH_SINCE, "unlock latch (request id)");
        String name = "rlock-latch";
        RLock lock = redisson.getLock(name);
        String me = redissonOwner();
        long tid = Thread.currentThread().getId();

        // Redisson releases one of two holds under id A; the module's retry of A replays 0.
        lock.lock(LEASE, TimeUnit.MILLISECONDS);
        lock.lock(LEASE, TimeUnit.MILLISECONDS);
        long unlocked = System.nanoTime();
        assertEquals(Boolean.FALSE, redissonUnlock(lock, tid, "latch-a", 10_000));
        assertEquals("0", raw.call("GET", "redisson_unlock_latch:{" + name + "}:latch-a"));
        long latchTtl = raw.pttl("redisson_unlock_latch:{" + name + "}:latch-a");
        assertTrue(latchTtl >= Env.leastTtlLeft(10_000, unlocked) && latchTtl <= 10_000, "latch PTTL " + latchTtl);
        assertEquals(0L, raw.call("LOCK.UNLOCK", name, me, "REQUEST", "latch-a", "10000"));
        assertEquals(Map.of(me, 1L), Module.holders(raw, name), "the replay released nothing");

        // The module releases the last hold under id B; Redisson's retry of B replays true
        // and leaves the next holder alone.
        assertEquals(1L, raw.call("LOCK.UNLOCK", name, me, "REQUEST", "latch-b", "10000"));
        assertEquals("1", raw.call("GET", "redisson_unlock_latch:{" + name + "}:latch-b"));
        String next = Env.moduleOwner(redisson);
        assertNull(raw.call("LOCK.ACQUIRE", name, next, String.valueOf(LEASE)));
        assertEquals(Boolean.TRUE, redissonUnlock(lock, tid, "latch-b", 10_000));
        assertEquals(Map.of(next, 1L), Module.holders(raw, name), "Redisson's retry released nothing");
        // Both sides read a latch the same: Redisson's "not held" (nil) is never latched.
        assertEquals(null, redissonUnlock(lock, tid, "latch-c", 10_000));
        assertEquals(0L, raw.call("EXISTS", "redisson_unlock_latch:{" + name + "}:latch-c"));
        assertEquals(1L, raw.call("LOCK.UNLOCK", name, next, "REQUEST", "latch-d", "10000"));

        // Redisson's public unlock then deletes its latch: 3.24-3.51 and 4.3+ do; 3.52-4.2
        // delete redisson_unlock_latch:{lock}:<instance id> instead (commit 255aa9748,
        // Redisson issue #6844), so their latch stays until its TTL.
        lock.lock(LEASE, TimeUnit.MILLISECONDS);
        lock.unlock();
        String pattern = "redisson_unlock_latch:{" + name + "}:*";
        if (Env.leavesUnlockLatch()) {
            Thread.sleep(200);
            List<String> left = redissonLatches(pattern);
            assertEquals(1, left.size(), "Redisson " + Env.VERSION + " leaves its latch: " + left);
            assertEquals("1", raw.call("GET", left.get(0)));
            long ttl = raw.pttl(left.get(0));
            assertTrue(ttl > 0, "kept until its TTL: " + ttl);
            Env.record("unlock latch", "DIFFERS: Redisson " + Env.VERSION + " leaves each unlock's latch until its TTL ("
                    + ttl + " ms left); LOCK.UNLOCK … REQUEST and Redisson's retry replay each other's replies (0 and 1)");
        } else {
            Env.await("Redisson's latch deleted", 10_000, () -> redissonLatches(pattern).isEmpty());
            Env.record("unlock latch", "Redisson's retry (same request id) and LOCK.UNLOCK … REQUEST replay each"
                    + " other's replies (0 and 1); Redisson deletes its latch after the reply");
        }
    }

    /** Latch keys of {@code pattern} but the ones this test wrote itself. */
    private static List<String> redissonLatches(String pattern) {
        List<?> scan = (List<?>) raw.call("SCAN", "0", "MATCH", pattern, "COUNT", "1000");
        List<String> out = new ArrayList<>();
        for (Object key : (List<?>) scan.get(1)) {
            if (!((String) key).matches(".*:latch-[abd]")) {
                out.add((String) key);
            }
        }
        return out;
    }

    /** Redisson's own unlock script call with a given request id (what its retry sends). */
    private static Boolean redissonUnlock(RLock lock, long threadId, String requestId, long ttl) throws Exception {
        for (Class<?> c = lock.getClass(); c != null; c = c.getSuperclass()) {
            for (Method m : c.getDeclaredMethods()) {
                Class<?>[] p = m.getParameterTypes();
                if (m.getName().equals("unlockInnerAsync") && p.length == 3 && p[0] == long.class
                        && p[1] == String.class && (p[2] == long.class || p[2] == int.class)
                        && !java.lang.reflect.Modifier.isAbstract(m.getModifiers())) {
                    m.setAccessible(true);
                    Object timeout = p[2] == int.class ? (Object) (int) ttl : (Object) ttl;
                    RFuture<?> f = (RFuture<?>) m.invoke(lock, threadId, requestId, timeout);
                    return (Boolean) f.toCompletableFuture().get(5, TimeUnit.SECONDS);
                }
            }
        }
        throw new AssertionError("Redisson " + Env.VERSION + " has no unlockInnerAsync(long, String, timeout)");
    }
}
