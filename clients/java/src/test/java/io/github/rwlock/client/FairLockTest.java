package io.github.rwlock.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Test;

/**
 * The fair lock ({@code FAIRLOCK.*}): arrival order, a wait that runs out or is interrupted
 * leaving the line, the watchdog renewing a fair hold, releases with LEASE and REQUEST, and the
 * non-reentrant option.
 */
class FairLockTest extends ServerTest {
    private static final String OTHER = "other:1";

    private static void await(String what, long ms, BooleanSupplier condition) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(ms);
        while (!condition.getAsBoolean()) {
            assertTrue(System.nanoTime() < deadline, "timed out waiting for " + what);
            Thread.sleep(2);
        }
    }

    /** A thread of its own: holds are per thread. */
    private static <T> CompletableFuture<T> inThread(java.util.concurrent.Callable<T> body) {
        CompletableFuture<T> result = new CompletableFuture<>();
        Thread thread = new Thread(() -> {
            try {
                result.complete(body.call());
            } catch (Throwable e) {
                result.completeExceptionally(e);
            }
        });
        thread.start();
        return result;
    }

    private void noTrace(String name) {
        assertEquals(0L, server.call("EXISTS", name, "redisson_lock_queue:{" + name + "}", "redisson_lock_timeout:{" + name + "}"),
                "nothing of " + name + " left");
    }

    @Test
    void waitersAreServedInArrivalOrder() throws Exception {
        String name = "f:order";
        FairLock lock = new FairLock(client, name);
        assertNull(server.call("FAIRLOCK.ACQUIRE", name, OTHER, "20000"));
        List<Integer> granted = Collections.synchronizedList(new ArrayList<>());
        List<CompletableFuture<Void>> done = new ArrayList<>();
        List<String> owners = new ArrayList<>();
        for (int i = 0; i < 5; i++) {
            int me = i;
            CompletableFuture<String> owner = new CompletableFuture<>();
            done.add(inThread(() -> {
                owner.complete(lock.getOwner());
                lock.lock();
                granted.add(me);
                Thread.sleep(5);
                lock.unlock();
                return null;
            }));
            owners.add(owner.get(5, TimeUnit.SECONDS));
            await("waiter " + i + " in line", 5_000, () -> lock.getWaiters().size() == me + 1);
        }
        assertEquals(owners, lock.getWaiters(), "the line is the arrival order");
        assertEquals(1L, server.call("FAIRLOCK.UNLOCK", name, OTHER));
        for (CompletableFuture<Void> f : done) {
            f.get(20, TimeUnit.SECONDS);
        }
        assertEquals(List.of(0, 1, 2, 3, 4), granted);
        noTrace(name);
    }

    @Test
    void aWaitThatRunsOutLeavesTheLine() throws Exception {
        String name = "f:timeout";
        FairLock lock = new FairLock(client, name);
        assertNull(server.call("FAIRLOCK.ACQUIRE", name, OTHER, "20000"));
        server.call("CONFIG", "RESETSTAT");
        assertFalse(lock.tryLock(), "tryLock() never joins the line");
        long start = System.nanoTime();
        assertFalse(lock.tryLock(300, TimeUnit.MILLISECONDS));
        long waited = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        // Never before the 300 ms wait is over; after it by what a loaded machine takes to reply.
        assertTrue(waited >= 290 && waited < 4_000, "waited " + waited);
        assertEquals(2, server.calls("fairlock.acquire"), "one command each, the wait on the server");
        assertEquals(List.of(), lock.getWaiters());
        NotAcquiredException refused = assertThrows(NotAcquiredException.class,
                () -> lock.hold(Duration.ofMillis(100), null));
        assertTrue(refused.getPttl() > 0);

        // Behind a waiter: the one that gives up leaves, the first keeps its place and is served.
        CompletableFuture<String> first = inThread(() -> {
            lock.lock(5, TimeUnit.SECONDS);
            String owner = lock.getOwner();
            lock.unlock();
            return owner;
        });
        await("the first waiter in line", 5_000, () -> lock.getWaiters().size() == 1);
        String firstOwner = lock.getWaiters().get(0);
        assertFalse(inThread(() -> lock.tryLock(300, TimeUnit.MILLISECONDS)).get(5, TimeUnit.SECONDS));
        assertEquals(List.of(firstOwner), lock.getWaiters());
        assertEquals(1L, server.call("FAIRLOCK.UNLOCK", name, OTHER));
        assertEquals(firstOwner, first.get(5, TimeUnit.SECONDS));
        noTrace(name);
    }

    @Test
    void anInterruptLeavesTheLine() throws Exception {
        String name = "f:interrupt";
        FairLock lock = new FairLock(client, name);
        assertNull(server.call("FAIRLOCK.ACQUIRE", name, OTHER, "20000"));
        CompletableFuture<Throwable> outcome = new CompletableFuture<>();
        Thread thread = Waiters.lockInterruptibly(lock, outcome);
        await("the waiter in line", 5_000, () -> lock.getWaiters().size() == 1);
        thread.interrupt();
        assertTrue(outcome.get(5, TimeUnit.SECONDS) instanceof InterruptedException);
        assertEquals(List.of(), lock.getWaiters(), "left the line at once (FAIRLOCK.CANCEL)");
        assertEquals("0", server.info("clients", "blocked_clients"));
        assertEquals(1L, server.call("FAIRLOCK.UNLOCK", name, OTHER));
        noTrace(name);
    }

    @Test
    void theWatchdogRenewsAFairHold() throws Exception {
        // The contract's watchdog scenario: a 1 s lease kept for 3.5 s (a 300 ms one, renewed every
        // 100 ms, ran out under the load of make test's parallel parts).
        try (Client quick = Client.builder(jedis).watchdogTimeout(Duration.ofMillis(1_000)).build()) {
            String name = "f:watchdog";
            FairLock lock = new FairLock(quick, name);
            lock.lock();
            long pttl = lock.remainTimeToLive();
            assertTrue(pttl > 0 && pttl <= 1_000, "the watchdog's lease: " + pttl);
            Thread.sleep(3_500);
            assertTrue(lock.isHeldByCurrentThread());
            assertFalse(lock.isLost());
            assertEquals("1", server.call("HGET", name, lock.getOwner()), "still held after three leases");
            assertEquals(1L, server.call("FAIRLOCK.ACQUIRE", name, OTHER, "1000", "NOQUEUE"));
            lock.unlock();
            noTrace(name);

            // A hold forced open is reported lost, and its release throws.
            List<String> lost = Collections.synchronizedList(new ArrayList<>());
            FairLock watched = new FairLock(quick, name, LockOptions.defaults().withOnLost((n, o) -> lost.add(n)));
            watched.lock();
            assertTrue(watched.forceUnlock());
            await("the loss reported", 10_000, () -> !lost.isEmpty());
            assertTrue(watched.isLost());
            assertThrows(NotHeldException.class, watched::unlock);
            noTrace(name);
        }
    }

    @Test
    void releasesCarryLeaseAndHeld() throws Exception {
        String name = "f:release";
        FairLock lock = new FairLock(client, name);
        lock.lock(20, TimeUnit.SECONDS);
        assertTrue(lock.tryLock(0, 2, TimeUnit.SECONDS), "re-entry");
        assertEquals(2, lock.getHoldCount());
        assertEquals("2", server.call("HGET", name, lock.getOwner()));
        server.call("CONFIG", "RESETSTAT");
        lock.unlock();
        long pttl = lock.remainTimeToLive();
        assertTrue(pttl > 0 && pttl <= 2_000, "re-armed with the latest acquisition's lease: " + pttl);
        assertEquals("1", server.call("HGET", name, lock.getOwner()));
        assertEquals(1, server.calls("fairlock.unlock"));
        assertEquals(0, server.calls("del"), "a release is one command");
        lock.unlock();
        noTrace(name);
        assertEquals(List.of(), server.call("KEYS", "redisson_*latch*"), "no latch written");
        assertThrows(NotHeldException.class, lock::unlock, "nothing held: FAIRLOCK.UNLOCK's 1 for a missing lock is no release");
        assertNull(server.call("FAIRLOCK.ACQUIRE", name, OTHER, "20000"));
        assertThrows(NotHeldException.class, lock::unlock, "another owner's hold");
        assertEquals("1", server.call("HGET", name, OTHER));
        assertTrue(lock.isLocked());
        assertTrue(lock.forceUnlock());
        assertFalse(lock.isLocked());
    }

    @Test
    void theNonReentrantOptionRefusesTheHolder() throws Exception {
        String name = "f:noreentry";
        FairLock lock = FairLock.nonReentrant(client, name);
        lock.lock();
        assertThrows(NotReentrantException.class, lock::tryLock);
        long start = System.nanoTime();
        assertThrows(NotReentrantException.class, () -> lock.tryLock(10, TimeUnit.SECONDS));
        // Refused at once, not after its 10 s wait: 3 s leave a loaded machine room.
        assertTrue(System.nanoTime() - start < TimeUnit.MILLISECONDS.toNanos(3_000), "the holder never waits for itself");
        assertEquals("1", server.call("HGET", name, lock.getOwner()));
        assertEquals(List.of(), lock.getWaiters());
        lock.unlock();
        noTrace(name);
    }

    @Test
    void optionsTheFairLockHasNot() {
        assertThrows(IllegalArgumentException.class,
                () -> new FairLock(client, "f:x", LockOptions.defaults().withSession(true)));
        assertThrows(IllegalArgumentException.class,
                () -> new FairLock(client, "f:x", LockOptions.defaults().withFenced(true)));
        assertThrows(IllegalArgumentException.class, () -> new FairLock(client, ""));
        assertThrows(IllegalArgumentException.class, () -> MultiLock.of(client, new FairLock(client, "f:x")));
    }
}
