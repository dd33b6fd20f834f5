package io.github.rwlock.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.CopyOnWriteArrayList;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import redis.clients.jedis.JedisPooled;

/** The plain lock (plain, fenced, non-reentrant), leases, the watchdog, waits and sessions. */
class LockTest extends ServerTest {
    private static <T> T inThread(java.util.concurrent.Callable<T> body) throws Exception {
        CompletableFuture<T> result = new CompletableFuture<>();
        Thread thread = new Thread(() -> {
            try {
                result.complete(body.call());
            } catch (Throwable e) {
                result.completeExceptionally(e);
            }
        });
        thread.start();
        return result.get(30, TimeUnit.SECONDS);
    }

    @Test
    void ownersAreTheClientUuidAndTheThreadId() throws Exception {
        PlainLock lock = new PlainLock(client, "t:owner");
        String owner = lock.getOwner();
        assertTrue(owner.matches("[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}:" + Thread.currentThread().getId()), owner);
        assertEquals(client.getId() + ":" + Thread.currentThread().getId(), owner);
        try (Client other = Client.create(jedis)) {
            assertNotEquals(client.getId(), other.getId());
        }
        assertNotEquals(owner, inThread(lock::getOwner));
    }

    @Test
    void reentersPerThreadAndReleasesAtTheLastUnlock() throws Exception {
        PlainLock lock = new PlainLock(client, "t:plain");
        lock.lock();
        assertTrue(lock.tryLock());
        assertEquals("2", server.call("HGET", "t:plain", lock.getOwner()));
        assertEquals(2, lock.getHoldCount());
        assertTrue(lock.isLocked());
        assertFalse(inThread(() -> lock.tryLock()), "another thread is another owner");
        lock.unlock();
        assertTrue(lock.isHeldByCurrentThread());
        lock.unlock();
        assertEquals(0L, server.call("EXISTS", "t:plain"));
        assertFalse(lock.isHeldByCurrentThread());
        assertThrows(NotHeldException.class, lock::unlock);
        assertEquals(0L, server.call("EXISTS", "t:plain"));
        assertEquals(0L, server.call("DBSIZE"), "no latch written");
        assertEquals(3, server.calls("lock.unlock"), "each release one command, the refused one too");
        assertEquals(0, server.calls("del"), "nothing to delete");
    }

    @Test
    void aTryIsOneCommandAndAWaitIsOneBlock() throws Exception {
        server.call("LOCK.ACQUIRE", "t:busy", "other:1", "10000");
        PlainLock lock = new PlainLock(client, "t:busy");
        server.call("CONFIG", "RESETSTAT");
        assertFalse(lock.tryLock());
        long start = System.nanoTime();
        assertFalse(lock.tryLock(400, TimeUnit.MILLISECONDS));
        long elapsed = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        // Never before the 400 ms wait is over; after it by what a loaded machine takes to reply.
        assertTrue(elapsed >= 350 && elapsed < 4000, "waited " + elapsed);
        assertEquals(2, server.calls("lock.acquire"));
        assertEquals("1", server.call("HGET", "t:busy", "other:1"));
        assertEquals(0L, server.call("HEXISTS", "t:busy", lock.getOwner()));
        NotAcquiredException refused = assertThrows(NotAcquiredException.class, () -> lock.hold(Duration.ZERO, null));
        assertTrue(refused.getPttl() > 0 && refused.getPttl() <= 10_000);
    }

    @Test
    void aWaiterIsServedAtTheRelease() throws Exception {
        PlainLock lock = new PlainLock(client, "t:handoff");
        lock.lock();
        CompletableFuture<Long> waited = CompletableFuture.supplyAsync(() -> {
            long start = System.nanoTime();
            lock.lock();
            long ms = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            lock.unlock();
            return ms;
        });
        RedisServer.waitUntil("the waiter", 5000, () -> "1".equals(server.info("clients", "blocked_clients")));
        Thread.sleep(300);
        lock.unlock();
        assertTrue(waited.get(10, TimeUnit.SECONDS) >= 250);
        assertEquals(0L, server.call("EXISTS", "t:handoff"));
    }

    @Test
    void aWaitLongerThanTheSocketTimeoutWorks() throws Exception {
        try (JedisPooled shortTimeout = server.pooled(300); Client quick = Client.create(shortTimeout)) {
            server.call("LOCK.ACQUIRE", "t:long", "other:1", "10000");
            CompletableFuture.runAsync(() -> {
                RedisServer.sleep(1200);
                server.call("LOCK.UNLOCK", "t:long", "other:1");
            });
            PlainLock lock = new PlainLock(quick, "t:long");
            long start = System.nanoTime();
            assertTrue(lock.tryLock(5, TimeUnit.SECONDS));
            long elapsed = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            assertTrue(elapsed >= 1000, "waited " + elapsed);
            lock.unlock();
            // lock(): without limit, also past the socket timeout.
            server.call("LOCK.ACQUIRE", "t:long", "other:1", "10000");
            CompletableFuture.runAsync(() -> {
                RedisServer.sleep(800);
                server.call("LOCK.UNLOCK", "t:long", "other:1");
            });
            lock.lock(5, TimeUnit.SECONDS);
            assertTrue(lock.isHeldByCurrentThread());
            lock.unlock();
        }
    }

    @Test
    void anInterruptEndsTheServerSideWait() throws Exception {
        server.call("LOCK.ACQUIRE", "t:interrupt", "other:1", "30000");
        PlainLock lock = new PlainLock(client, "t:interrupt");
        CompletableFuture<Throwable> outcome = new CompletableFuture<>();
        Thread waiter = Waiters.lockInterruptibly(lock, outcome);
        RedisServer.waitUntil("the waiter", 5000, () -> "1".equals(server.info("clients", "blocked_clients")));
        long start = System.nanoTime();
        waiter.interrupt();
        Throwable thrown = outcome.get(10, TimeUnit.SECONDS);
        assertTrue(thrown instanceof InterruptedException, String.valueOf(thrown));
        // At the interrupt, not never (the wait has no limit): 5 s leave a loaded machine room.
        assertTrue(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start) < 5000);
        RedisServer.waitUntil("no blocked client", 10_000, () -> "0".equals(server.info("clients", "blocked_clients")));
        assertEquals(1L, server.call("HLEN", "t:interrupt"), "only the other holder");
        // The same with a timed tryLock, and the lock still works after.
        CompletableFuture<Throwable> timed = new CompletableFuture<>();
        Thread second = new Thread(() -> {
            try {
                lock.tryLock(20, TimeUnit.SECONDS);
                timed.complete(null);
            } catch (Throwable e) {
                timed.complete(e);
            }
        });
        second.start();
        RedisServer.waitUntil("the waiter", 5000, () -> "1".equals(server.info("clients", "blocked_clients")));
        second.interrupt();
        assertTrue(timed.get(5, TimeUnit.SECONDS) instanceof InterruptedException);
        RedisServer.waitUntil("no blocked client", 10_000, () -> "0".equals(server.info("clients", "blocked_clients")));
        server.call("LOCK.UNLOCK", "t:interrupt", "other:1");
        assertTrue(lock.tryLock(1, TimeUnit.SECONDS));
        lock.unlock();
        // Interrupted before asking: nothing is sent.
        server.call("CONFIG", "RESETSTAT");
        Thread.currentThread().interrupt();
        assertThrows(InterruptedException.class, lock::lockInterruptibly);
        assertEquals(0, server.calls("lock.acquire"));
    }

    @Test
    void aGivenLeaseIsTheTtlAndNotRenewed() throws Exception {
        PlainLock lock = new PlainLock(client, "t:lease");
        long start = System.nanoTime();
        lock.lock(2, TimeUnit.SECONDS);
        long pttl = lock.remainTimeToLive();
        // The 2 s lease less the time gone by since (however long a loaded machine took), less 20 ms
        // for the clocks' granularity.
        long least = 2000 - TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start) - 20;
        assertTrue(pttl >= least && pttl <= 2000, "pttl " + pttl + ", least " + least);
        assertTrue(lock.tryLock(0, 3, TimeUnit.SECONDS));
        assertEquals("2", server.call("HGET", "t:lease", lock.getOwner()));
        lock.unlock();
        lock.unlock();
        assertEquals(0, server.calls("lock.renew"));
    }

    @Test
    void theWatchdogKeepsAOneSecondLeaseAndReportsALoss() throws Exception {
        List<String> lost = new CopyOnWriteArrayList<>();
        try (Client dogged = Client.builder(jedis).watchdogTimeout(Duration.ofSeconds(1)).build()) {
            PlainLock lock = new PlainLock(dogged, "t:watchdog", LockOptions.defaults().withOnLost((name, owner) -> lost.add(name + "|" + owner)));
            lock.lock();
            long pttl = lock.remainTimeToLive();
            // The 1 s watchdog timeout, not the 30 s default (what is left of it depends on when
            // the last renewal ran, late on a loaded machine).
            assertTrue(pttl > 0 && pttl <= 1000, "pttl " + pttl);
            Thread.sleep(3500);
            assertTrue(lock.isHeldByCurrentThread());
            assertFalse(lock.isLost());
            assertEquals("1", server.call("HGET", "t:watchdog", lock.getOwner()));
            long renewals = server.calls("lock.renew");
            assertTrue(renewals >= 6 && renewals <= 14, "renewals " + renewals);
            lock.unlock();
            server.call("CONFIG", "RESETSTAT");
            Thread.sleep(800);
            assertEquals(0, server.calls("lock.renew"));

            // A hold forced open: the next renewal finds it gone.
            lock.lock();
            assertTrue(lock.forceUnlock());
            RedisServer.waitUntil("the loss", 10_000, () -> !lost.isEmpty());
            assertEquals(List.of("t:watchdog|" + lock.getOwner()), lost);
            assertTrue(lock.isLost());
            // Taken again after the loss: one hold, watched again.
            lock.lock();
            assertFalse(lock.isLost());
            assertEquals(1, lock.getHoldCount());
            Thread.sleep(700);
            assertEquals("1", server.call("HGET", "t:watchdog", lock.getOwner()));
            assertTrue(lock.forceUnlock());
            RedisServer.waitUntil("the second loss", 10_000, () -> lost.size() == 2);
            assertTrue(lock.isLost());
            assertFalse(lock.isHeldByCurrentThread());
            assertThrows(NotHeldException.class, lock::unlock);
            assertEquals(0L, server.call("EXISTS", "t:watchdog"));
        }
    }

    @Test
    void fencedTokensGrowAndNonReentrantRefusesItsHolder() throws Exception {
        PlainLock fenced = PlainLock.fenced(client, "t:fenced");
        Long first = fenced.lockAndGetToken();
        assertEquals(first, fenced.getToken());
        assertEquals(String.valueOf(first), server.call("GET", "redisson_lock_token:{t:fenced}"));
        fenced.unlock();
        try (Held held = fenced.hold(Duration.ofSeconds(1), Duration.ofSeconds(5))) {
            assertTrue(held.token() > first);
        }
        assertEquals(0L, server.call("EXISTS", "t:fenced"));
        assertNull(new PlainLock(client, "t:unfenced").lockAndGetToken());

        PlainLock once = PlainLock.nonReentrant(client, "t:once");
        assertTrue(once.tryLock());
        assertThrows(NotReentrantException.class, once::tryLock);
        assertEquals("1", server.call("HGET", "t:once", once.getOwner()));
        once.unlock();
        assertEquals(0L, server.call("EXISTS", "t:once"));
    }

    @Test
    void sessionHoldsLiveWithTheirConnection() throws Exception {
        try (Client dogged = Client.builder(jedis).watchdogTimeout(Duration.ofSeconds(1)).build()) {
            PlainLock lock = new PlainLock(dogged, "t:session", LockOptions.defaults().withSession(true));
            lock.lock();
            assertTrue(lock.tryLock(), "a re-entry on the session's connection");
            assertEquals("2", server.info("rwlock_sessions", "rwlock_session_holds"));
            Thread.sleep(1500);
            assertEquals(0, server.calls("lock.renew"));
            assertEquals("2", server.call("HGET", "t:session", lock.getOwner()));
            lock.unlock();
            lock.unlock();
            assertEquals(0L, server.call("EXISTS", "t:session"));

        }
        // The connection closed: the server frees the hold; the release says so. A pool of its
        // own, so that the session's connection is the only new one.
        java.util.Set<String> before = clientIds();
        try (JedisPooled own = server.pooled(); Client sessions = Client.create(own)) {
            PlainLock lock = new PlainLock(sessions, "t:session", LockOptions.defaults().withSession(true));
            lock.lock();
            java.util.Set<String> after = clientIds();
            after.removeAll(before);
            assertEquals(1, after.size(), after.toString());
            assertEquals(1L, server.call("CLIENT", "KILL", "ID", after.iterator().next()));
            RedisServer.waitUntil("the session's end", 10_000, () -> 0L == (Long) server.call("EXISTS", "t:session"));
            assertThrows(NotHeldException.class, lock::unlock);
            assertTrue(lock.tryLock());
            lock.unlock();
            assertEquals(0L, server.call("EXISTS", "t:session"));
        }
    }

    /** The ids of the server's clients but the one asking. */
    private java.util.Set<String> clientIds() {
        java.util.Set<String> ids = new java.util.HashSet<>();
        for (String line : ((String) server.call("CLIENT", "LIST")).split("\n")) {
            if (line.startsWith("id=") && !line.contains("cmd=client")) {
                ids.add(line.substring(3, line.indexOf(' ')));
            }
        }
        return ids;
    }

    @Test
    void threadsOnTwoClientsExcludeEachOther() throws Exception {
        // An exclusion checker: a guard key taken SET NX inside every critical section.
        java.util.concurrent.ExecutorService threads = java.util.concurrent.Executors.newFixedThreadPool(4);
        try (Client second = Client.create(jedis)) {
            java.util.concurrent.atomic.AtomicInteger violations = new java.util.concurrent.atomic.AtomicInteger();
            java.util.concurrent.atomic.AtomicInteger sections = new java.util.concurrent.atomic.AtomicInteger();
            List<CompletableFuture<Void>> workers = new java.util.ArrayList<>();
            // A count of sections, not a time: a busy machine takes longer,
            // and the ceiling only bounds a hang.
            int wanted = 40;
            long ceiling = System.nanoTime() + TimeUnit.SECONDS.toNanos(20);
            for (int i = 0; i < 4; i++) {
                PlainLock lock = new PlainLock(i % 2 == 0 ? client : second, "t:contended");
                workers.add(CompletableFuture.runAsync(() -> {
                    while (sections.get() < wanted && System.nanoTime() < ceiling) {
                        try {
                            // Sections last a few ms: 10 s without a turn is
                            // a lost wake-up, not a slow machine.
                            if (!lock.tryLock(10, 5, TimeUnit.SECONDS)) {
                                violations.incrementAndGet();
                                continue;
                            }
                        } catch (InterruptedException e) {
                            throw new IllegalStateException(e);
                        }
                        try {
                            if (!"OK".equals(server.call("SET", "t:guard", "x", "NX", "PX", "5000"))) {
                                violations.incrementAndGet();
                            }
                            sections.incrementAndGet();
                            server.call("DEL", "t:guard");
                        } finally {
                            lock.unlock();
                        }
                    }
                }, threads));
            }
            for (CompletableFuture<Void> worker : workers) {
                worker.get(30, TimeUnit.SECONDS);
            }
            assertEquals(0, violations.get());
            assertTrue(sections.get() >= wanted, "sections " + sections.get() + " within 20 s");
            assertEquals(0L, server.call("EXISTS", "t:contended"));
        } finally {
            threads.shutdownNow();
        }
    }

    @Test
    void badInputsAreClearErrors() {
        assertThrows(IllegalArgumentException.class, () -> new PlainLock(client, ""));
        assertThrows(NullPointerException.class, () -> new PlainLock(client, null));
        PlainLock lock = new PlainLock(client, "t:bad");
        assertThrows(IllegalArgumentException.class, () -> lock.lock(0, TimeUnit.SECONDS));
        assertThrows(IllegalArgumentException.class, () -> lock.tryLock(-1, TimeUnit.SECONDS));
        assertThrows(IllegalArgumentException.class, () -> lock.hold(Duration.ofSeconds(-1), null));
        assertThrows(UnsupportedOperationException.class, lock::newCondition);
        assertThrows(IllegalArgumentException.class, () -> Client.builder(jedis).watchdogTimeout(Duration.ZERO));
        assertEquals(0L, server.call("DBSIZE"));
    }
}
