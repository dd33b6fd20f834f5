package rwlock.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.redisson.api.RReadWriteLock;

/**
 * Redisson's RReadWriteLock and the module's RWLOCK.* on the same names:
 * shared reads, exclusive writes, downgrade, writers woken by the other
 * side's last read unlock, and the read lock's watchdog.
 */
class ReadWriteLockTest extends OneServer {
    private static final long LEASE = 10_000;
    private static final int HANDOFFS = 20;

    private static String lease() {
        return String.valueOf(LEASE);
    }

    @Test
    void readersOnBothSidesAtOnce() throws Exception {
        String name = "rw-readers";
        RReadWriteLock rw = redisson.getReadWriteLock(name);
        String owner = Env.moduleOwner(redisson);
        rw.readLock().lock(LEASE, TimeUnit.MILLISECONDS);
        assertNull(raw.call("RWLOCK.READ", name, owner, lease()), "a module reader joins Redisson's");
        try (Env.JavaThread other = new Env.JavaThread()) {
            assertTrue(other.run(() -> rw.readLock().tryLock(0, LEASE, TimeUnit.MILLISECONDS)),
                    "a second Redisson reader joins both");
            assertEquals("read", Module.mode(raw, name));
            assertEquals(3, Module.owners(raw, name).size());
            other.run(() -> {
                rw.readLock().unlock();
                return null;
            });
        }
        rw.readLock().unlock();
        assertEquals("read", Module.mode(raw, name), "the module's reader still holds");
        assertEquals(1L, raw.call("RWLOCK.UNLOCK", name, owner, "READ"));
        assertEquals("none", Module.mode(raw, name));
    }

    @Test
    void aWriterOnEitherSideExcludesTheOther() throws Exception {
        String name = "rw-writer";
        RReadWriteLock rw = redisson.getReadWriteLock(name);
        String owner = Env.moduleOwner(redisson);
        rw.writeLock().lock(LEASE, TimeUnit.MILLISECONDS);
        assertInstanceOf(Long.class, raw.call("RWLOCK.READ", name, owner, lease()), "Redisson's writer refuses a module reader");
        assertInstanceOf(Long.class, raw.call("RWLOCK.WRITE", name, owner, lease()), "and a module writer");
        assertEquals("write", Module.mode(raw, name));
        rw.writeLock().unlock();

        assertNull(raw.call("RWLOCK.WRITE", name, owner, lease()));
        try (Env.JavaThread other = new Env.JavaThread()) {
            assertFalse(other.run(() -> rw.readLock().tryLock(0, LEASE, TimeUnit.MILLISECONDS)),
                    "the module's writer refuses a Redisson reader");
            assertFalse(other.run(() -> rw.writeLock().tryLock(0, LEASE, TimeUnit.MILLISECONDS)), "and a writer");
            assertTrue(other.run(() -> rw.writeLock().isLocked()));
            assertFalse(other.run(() -> rw.writeLock().isHeldByCurrentThread()));
        }
        assertEquals(1L, raw.call("RWLOCK.UNLOCK", name, owner, "WRITE"));
        // Redisson readers refuse a module writer as well.
        rw.readLock().lock(LEASE, TimeUnit.MILLISECONDS);
        assertInstanceOf(Long.class, raw.call("RWLOCK.WRITE", name, owner, lease()));
        rw.readLock().unlock();
    }

    @Test
    void downgradeOnBothSides() throws Exception {
        String name = "rw-downgrade";
        RReadWriteLock rw = redisson.getReadWriteLock(name);
        String owner = Env.moduleOwner(redisson);
        // Redisson: write, read, release the write: a read hold that lets module readers in.
        rw.writeLock().lock(LEASE, TimeUnit.MILLISECONDS);
        rw.readLock().lock(LEASE, TimeUnit.MILLISECONDS);
        rw.writeLock().unlock();
        assertEquals("read", Module.mode(raw, name));
        assertNull(raw.call("RWLOCK.READ", name, owner, lease()));
        assertInstanceOf(Long.class, raw.call("RWLOCK.WRITE", name, Env.moduleOwner(redisson), lease()));
        rw.readLock().unlock();
        assertEquals(1L, raw.call("RWLOCK.UNLOCK", name, owner, "READ"));

        // The module: the same steps; Redisson readers get in, writers do not.
        assertNull(raw.call("RWLOCK.WRITE", name, owner, lease()));
        assertNull(raw.call("RWLOCK.READ", name, owner, lease()));
        assertEquals(1L, raw.call("RWLOCK.UNLOCK", name, owner, "WRITE"));
        assertEquals("read", Module.mode(raw, name));
        try (Env.JavaThread other = new Env.JavaThread()) {
            assertTrue(other.run(() -> rw.readLock().tryLock(0, LEASE, TimeUnit.MILLISECONDS)));
            assertFalse(rw.writeLock().tryLock(0, LEASE, TimeUnit.MILLISECONDS));
            other.run(() -> {
                rw.readLock().unlock();
                return null;
            });
        }
        assertEquals(1L, raw.call("RWLOCK.UNLOCK", name, owner, "READ"));
    }

    @Test
    void aRedissonWriterWakesOnTheModulesLastReadUnlock() throws Exception {
        List<Double> samples = new ArrayList<>();
        String a = Env.moduleOwner(redisson);
        String b = Env.moduleOwner(redisson);
        try (Env.JavaThread writer = new Env.JavaThread()) {
            for (int i = 0; i < HANDOFFS; i++) {
                String name = "rw-m2r-" + i;
                RReadWriteLock rw = redisson.getReadWriteLock(name);
                assertNull(raw.call("RWLOCK.READ", name, a, lease()));
                assertNull(raw.call("RWLOCK.READ", name, b, lease()));
                Future<Long> got = writer.submit(() -> {
                    rw.writeLock().lock(LEASE, TimeUnit.MILLISECONDS);
                    return System.nanoTime();
                });
                Env.await("Redisson writer waiting", 5_000,
                        () -> Env.subscribers(raw, "redisson_rwlock:{" + name + "}") > 0);
                assertEquals(0L, raw.call("RWLOCK.UNLOCK", name, a, "READ"));
                Thread.sleep(20);
                assertFalse(got.isDone(), "one module reader still holds");
                long t0 = System.nanoTime();
                assertEquals(1L, raw.call("RWLOCK.UNLOCK", name, b, "READ"));
                samples.add((got.get(LEASE / 2, TimeUnit.MILLISECONDS) - t0) / 1e6);
                assertEquals("write", Module.mode(raw, name));
                writer.run(() -> {
                    rw.writeLock().unlock();
                    return null;
                });
            }
        }
        Env.record("handoff module->Redisson (RReadWriteLock, last read unlock -> writer)", Env.summary(samples));
        assertTrue(Env.percentile(samples, 99) < Env.HANDOFF_MS, Env.summary(samples));
    }

    @Test
    void aModuleWriterWakesOnRedissonsLastReadUnlock() throws Exception {
        List<Double> samples = new ArrayList<>();
        String owner = Env.moduleOwner(redisson);
        try (Env.JavaThread r1 = new Env.JavaThread(); Env.JavaThread r2 = new Env.JavaThread();
             Env.JavaThread moduleThread = new Env.JavaThread(); Raw waiterConn = new Raw(server.port)) {
            for (int i = 0; i < HANDOFFS; i++) {
                String name = "rw-r2m-" + i;
                RReadWriteLock rw = redisson.getReadWriteLock(name);
                for (Env.JavaThread r : List.of(r1, r2)) {
                    r.run(() -> {
                        rw.readLock().lock(LEASE, TimeUnit.MILLISECONDS);
                        return null;
                    });
                }
                Future<Object[]> got = moduleThread.submit(() -> {
                    Object reply = waiterConn.callBlocking("RWLOCK.WRITE", name, owner, lease(), "BLOCK", "5000");
                    return new Object[] {reply, System.nanoTime()};
                });
                Env.await("module writer blocked", 5_000, () -> Env.blockedClients(raw) > 0);
                r1.run(() -> {
                    rw.readLock().unlock();
                    return null;
                });
                Thread.sleep(20);
                assertFalse(got.isDone(), "one Redisson reader still holds");
                long t0 = r2.run(() -> {
                    long t = System.nanoTime();
                    rw.readLock().unlock();
                    return t;
                });
                Object[] reply = got.get(LEASE / 2, TimeUnit.MILLISECONDS);
                assertNull(reply[0], "the module writer takes the lock");
                samples.add(((Long) reply[1] - t0) / 1e6);
                assertEquals(1L, raw.call("RWLOCK.UNLOCK", name, owner, "WRITE"));
            }
        }
        Env.record("handoff Redisson->module (RReadWriteLock, last read unlock -> writer)", Env.summary(samples));
        assertTrue(Env.percentile(samples, 99) < Env.HANDOFF_MS, Env.summary(samples));
    }

    @Test
    void theReadWatchdogRenewsWhileModuleReadersComeAndGo() throws Exception {
        String name = "rw-watchdog";
        RReadWriteLock rw = redisson.getReadWriteLock(name);
        String me = redisson.getId() + ":" + Thread.currentThread().getId();
        String writer = Env.moduleOwner(redisson);
        rw.readLock().lock(); // no lease: 1 s watchdog timeout, renewed by Redisson
        long start = System.nanoTime();
        int readers = 0;
        int refusals = 0;
        while (System.nanoTime() - start < TimeUnit.MILLISECONDS.toNanos(3_500)) {
            String reader = Env.moduleOwner(redisson);
            assertNull(raw.call("RWLOCK.READ", name, reader, "400"), "module readers share Redisson's read hold");
            readers++;
            assertInstanceOf(Long.class, raw.call("RWLOCK.WRITE", name, writer, "1000"), "no writer while Redisson reads");
            refusals++;
            Thread.sleep(40);
            raw.call("RWLOCK.UNLOCK", name, reader, "READ");
            Map<String, long[]> owners = Module.owners(raw, name);
            assertTrue(owners.containsKey(me), "Redisson's read hold lives on: " + owners.keySet());
            Thread.sleep(40);
        }
        assertTrue(raw.pttl(name) > 0);
        // A module reader about every half second on average: ten times the 80 ms of pauses, which
        // a loaded machine still makes (each round checks that Redisson's read hold lives on).
        assertTrue(readers >= 7, "module readers " + readers);
        rw.readLock().unlock();
        assertNull(raw.call("RWLOCK.WRITE", name, writer, "1000"), "the writer gets in after Redisson's last read");
        assertEquals(1L, raw.call("RWLOCK.UNLOCK", name, writer, "WRITE"));
        Env.record("watchdog RReadWriteLock", "read hold kept 3.5 s on a 1 s lease while " + readers
                + " module readers came and went; module writer refused " + refusals + " times");
    }

    /**
     * Redisson before 4.4 renews every reader's lease key of the lock from
     * its read watchdog, the module's readers' too; 4.4+ renews only its own,
     * as RWLOCK.RENEW does. A module reader that stopped (never renews, never
     * unlocks) thus lives on under an older Redisson reader's watchdog.
     */
    @Test
    void theReadWatchdogAndOtherReadersLeases() throws Exception {
        String name = "rw-other-leases";
        RReadWriteLock rw = redisson.getReadWriteLock(name);
        String stale = Env.moduleOwner(redisson);
        rw.readLock().lock(); // watchdog: 1 s lease renewed about every 333 ms
        assertNull(raw.call("RWLOCK.READ", name, stale, "600"));
        String leaseKey = name.contains("{") ? name + ":" + stale + ":rwlock_timeout:1" : "{" + name + "}:" + stale + ":rwlock_timeout:1";
        assertTrue(raw.pttl(leaseKey) > 0, "the module reader's lease key " + leaseKey);
        Thread.sleep(1_500);
        long pttl = raw.pttl(leaseKey);
        if (Env.atLeast(Env.READ_RENEW_OWN_SINCE)) {
            assertEquals(-2L, pttl, "Redisson " + Env.VERSION + " renews only its own read leases");
            Env.record("read watchdog vs module readers", "renews only its own read leases (as RWLOCK.RENEW):"
                    + " a module reader's 600 ms lease ran out under it");
        } else {
            assertTrue(pttl > 0, "Redisson " + Env.VERSION + " renews every reader's lease, the module's too: "
                    + pttl);
            Env.record("read watchdog vs module readers", "DIFFERS: renews every reader's lease key:"
                    + " a module reader's 600 ms lease still had " + pttl + " ms after 1.5 s");
        }
        rw.readLock().unlock();
        Object last = raw.call("RWLOCK.UNLOCK", name, stale, "READ");
        assertTrue(last == null || last instanceof Long, "the stale reader's unlock: " + last);
        raw.call("RWLOCK.FORCEUNLOCK", name);
    }
}
