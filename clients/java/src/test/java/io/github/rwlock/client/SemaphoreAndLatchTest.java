package io.github.rwlock.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import redis.clients.jedis.JedisPooled;
import redis.clients.jedis.exceptions.JedisConnectionException;

/**
 * {@link DistributedSemaphore} and {@link DistributedCountDownLatch} against a real server: waits
 * served by other connections, permits never over-taken under contention, interrupted and timed-out
 * waits leaving nothing parked, lost replies through {@link FaultProxy} (an acquisition and a
 * release counted once, a count-down raised and never resent, an await asked again), and one latch
 * waking every waiter.
 */
class SemaphoreAndLatchTest extends ServerTest {
    private static String requestId(List<String> command) {
        int at = command.indexOf("REQUEST");
        assertTrue(at > 0 && command.size() > at + 2, "no REQUEST in " + command);
        return command.get(at + 1);
    }

    @Test
    void aWaitIsServedByAnotherConnectionsRelease() throws Exception {
        DistributedSemaphore semaphore = new DistributedSemaphore(client, "sem:served");
        assertTrue(semaphore.trySetPermits(0));
        ExecutorService thread = Executors.newSingleThreadExecutor();
        try (Client other = Client.create(jedis)) {
            server.call("CONFIG", "RESETSTAT");
            Future<Boolean> taken = thread.submit(() -> semaphore.tryAcquire(2, 30, TimeUnit.SECONDS));
            RedisServer.waitUntil("the acquisition waits on the server", 10_000, () -> blocked() == 1);
            new DistributedSemaphore(other, "sem:served").release(1);
            assertEquals(1, semaphore.availablePermits(), "1 of 2 is not enough: the waiter stays parked");
            assertEquals(1, blocked());
            new DistributedSemaphore(other, "sem:served").release(1);
            assertTrue(taken.get(30, TimeUnit.SECONDS), "served by the other client's release");
            assertEquals(0, semaphore.availablePermits());
            assertEquals(1, server.calls("semaphore.acquire"), "one BLOCK on the server, no polling");
            semaphore.release(2);
            assertEquals(2, semaphore.availablePermits());
        } finally {
            thread.shutdownNow();
        }
    }

    @Test
    void aTrySetWithATimeToLiveLastsThroughAcquisitionsAndReleasesAsRedissonsDoes() {
        DistributedSemaphore semaphore = new DistributedSemaphore(client, "sem:ttl");
        assertTrue(semaphore.trySetPermits(2, Duration.ofSeconds(60)));
        assertFalse(semaphore.trySetPermits(5, Duration.ofSeconds(60)), "a count exists");
        long pttl = server.integer("PTTL", "sem:ttl");
        assertTrue(pttl > 0 && pttl <= 60_000, "the semaphore's lifetime: " + pttl);
        assertTrue(semaphore.tryAcquire());
        semaphore.release();
        assertTrue(server.integer("PTTL", "sem:ttl") > 0, "kept by an acquisition and a release");
        semaphore.addPermits(1);
        assertEquals(-1L, server.integer("PTTL", "sem:ttl"), "dropped by an add, as the script's SET");
        assertEquals(3, semaphore.availablePermits());
        assertThrows(IllegalArgumentException.class, () -> semaphore.trySetPermits(1, Duration.ZERO));
    }

    /**
     * A wait's reply is read with the wait plus a margin as the socket timeout, as a lock's: waits
     * of 1.5 s on a pool whose socket timeout is 300 ms run out on the server, not in the client.
     */
    @Test
    void aWaitOutlastsTheSocketTimeout() throws Exception {
        try (JedisPooled impatient = server.pooled(300); Client on = Client.create(impatient)) {
            DistributedSemaphore semaphore = new DistributedSemaphore(on, "sem:long");
            DistributedCountDownLatch latch = new DistributedCountDownLatch(on, "latch:long");
            assertTrue(latch.trySetCount(1));
            long start = System.nanoTime();
            assertFalse(semaphore.tryAcquire(1, 1500, TimeUnit.MILLISECONDS), "no permits: the wait runs out");
            assertTrue(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start) >= 1400, "it waited on the server");
            start = System.nanoTime();
            assertFalse(latch.await(1500, TimeUnit.MILLISECONDS), "not counted down: the wait runs out");
            assertTrue(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start) >= 1400, "it waited on the server");
        }
    }

    @Test
    void permitsAreNeverMoreThanTheCountUnderContention() throws Exception {
        DistributedSemaphore setup = new DistributedSemaphore(client, "sem:guard");
        assertTrue(setup.trySetPermits(3));
        int violations = contend(3, 6, 15, (own, worker) -> {
            DistributedSemaphore semaphore = new DistributedSemaphore(own, "sem:guard");
            int want = worker % 2 + 1; // takers of 1 and of 2 at once
            boolean interruptible = worker % 3 != 0;
            return new Contender() {
                @Override
                public int take() throws Exception {
                    if (interruptible) {
                        assertTrue(semaphore.tryAcquire(want, 60, TimeUnit.SECONDS), "served within 60 s");
                    } else {
                        semaphore.acquireUninterruptibly(want);
                    }
                    return want;
                }

                @Override
                public void giveBack() {
                    semaphore.release(want);
                }
            };
        });
        assertEquals(0, violations, "never more permits held than the count");
        assertEquals(3, setup.availablePermits(), "every permit back");
        assertTrue(nothingWaits());
    }

    @Test
    void anInterruptedOrTimedOutSemaphoreWaitLeavesNothing() throws Exception {
        DistributedSemaphore semaphore = new DistributedSemaphore(client, "sem:cancel");
        assertTrue(semaphore.trySetPermits(0));
        aWaitRunsOutAndAnInterruptEndsAnother(() -> !semaphore.tryAcquire(1, 300, TimeUnit.MILLISECONDS),
                () -> semaphore.acquire(2));
        semaphore.release(2);
        assertEquals(2, semaphore.availablePermits(), "nobody took the permits for the ended wait");

        Thread.currentThread().interrupt();
        assertThrows(InterruptedException.class, semaphore::acquire, "interrupted before: nothing sent");
        assertEquals(2, semaphore.availablePermits());
    }

    /**
     * The server served the wait, the reply never came (the proxy holds it back), and then the
     * waiting thread is interrupted: the permits the call never heard of are given back, found by
     * the acquisition's latch, since giving back permits never taken would add some.
     */
    @Test
    void anInterruptAfterAnUnheardGrantGivesThePermitsBack() throws Exception {
        try (FaultProxy proxy = new FaultProxy(server.hostAndPort(), Set.of("SEMAPHORE.ACQUIRE"));
                JedisPooled proxied = new JedisPooled(proxy.hostAndPort());
                Client on = Client.create(proxied)) {
            DistributedSemaphore semaphore = new DistributedSemaphore(on, "sem:unheard");
            assertTrue(semaphore.trySetPermits(0));
            anInterruptAfterAnUnheardGrant(proxy, () -> assertTrue(semaphore.tryAcquire(2, 60, TimeUnit.SECONDS)),
                    () -> server.call("SEMAPHORE.RELEASE", "sem:unheard", "2"),
                    () -> assertEquals(0, semaphore.availablePermits(), "granted on the server"));
            assertEquals(2, semaphore.availablePermits(), "the unheard grant given back");
        }
    }

    @Test
    void anInterruptedOrTimedOutLatchWaitLeavesNothing() throws Exception {
        DistributedCountDownLatch latch = new DistributedCountDownLatch(client, "latch:cancel");
        assertTrue(latch.trySetCount(1));
        long start = System.nanoTime();
        assertFalse(latch.await(300, TimeUnit.MILLISECONDS));
        assertTrue(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start) >= 250, "it waited");
        assertTrue(nothingWaits(), "a wait that ran out leaves the queue");

        interruptEndsTheWait(latch::await);
        assertEquals(1, latch.getCount(), "an await changes nothing");
    }

    @Test
    void aLatchWakesEveryWaiterAtTheLastCountDown() throws Exception {
        int waiters = 4;
        DistributedCountDownLatch latch = new DistributedCountDownLatch(client, "latch:all");
        assertTrue(latch.trySetCount(2));
        ExecutorService pool = Executors.newFixedThreadPool(waiters);
        try (Client other = Client.create(jedis)) {
            List<Future<Boolean>> reached = new ArrayList<>();
            for (int i = 0; i < waiters; i++) {
                reached.add(pool.submit(() -> latch.await(60, TimeUnit.SECONDS)));
            }
            RedisServer.waitUntil("every await waits on the server", 20_000, () -> blocked() == waiters);
            DistributedCountDownLatch counted = new DistributedCountDownLatch(other, "latch:all");
            counted.countDown();
            assertEquals(1, counted.getCount());
            assertEquals(waiters, blocked(), "still waiting at 1");
            counted.countDown();
            for (Future<Boolean> one : reached) {
                assertTrue(one.get(30, TimeUnit.SECONDS), "woken by the last count-down");
            }
            assertEquals(0, latch.getCount());
            assertEquals(0L, server.call("EXISTS", "latch:all"), "the latch went at zero");
            assertTrue(nothingWaits());
        } finally {
            pool.shutdownNow();
        }
    }

    @Test
    void lostRepliesTakeAndGivePermitsOnceAndACountDownIsNotResent() throws Exception {
        try (FaultProxy proxy = new FaultProxy(server.hostAndPort(),
                Set.of("SEMAPHORE.ACQUIRE", "SEMAPHORE.RELEASE", "LATCH.COUNTDOWN", "LATCH.AWAIT"));
                JedisPooled proxied = new JedisPooled(proxy.hostAndPort());
                Client on = Client.create(proxied)) {
            DistributedSemaphore semaphore = new DistributedSemaphore(on, "sem:lost");
            assertTrue(semaphore.trySetPermits(3));

            // A try: its reply lost after the server granted it; the resend is answered from the latch.
            server.call("CONFIG", "RESETSTAT");
            proxy.arm();
            assertTrue(semaphore.tryAcquire(2));
            assertTrue(proxy.dropped());
            List<List<String>> sent = proxy.seen();
            assertEquals(2, sent.size(), "the acquisition and one resend: " + sent);
            assertEquals(sent.get(0), sent.get(1), "the same command, the same request id");
            assertEquals(List.of("SEMAPHORE.ACQUIRE", "sem:lost", "2", "REQUEST"), sent.get(0).subList(0, 4));
            assertEquals("13500", sent.get(0).get(5));
            assertEquals(1, server.calls("pexpire"), "the resend writes the latch's expiry, for WAIT to cover the grant");
            assertEquals(1, semaphore.availablePermits(), "2 taken once");

            // A wait parked on the server, its reply lost when a release serves it.
            proxy.arm();
            ExecutorService thread = Executors.newSingleThreadExecutor();
            try {
                Future<Boolean> waited = thread.submit(() -> semaphore.tryAcquire(3, 30, TimeUnit.SECONDS));
                RedisServer.waitUntil("the acquisition waits on the server", 10_000, () -> blocked() == 1);
                server.call("SEMAPHORE.RELEASE", "sem:lost", "2");
                assertTrue(waited.get(60, TimeUnit.SECONDS));
            } finally {
                thread.shutdownNow();
            }
            assertTrue(proxy.dropped());
            List<List<String>> both = proxy.seen().subList(2, 4);
            assertEquals(requestId(both.get(0)), requestId(both.get(1)), "the resend carries the same id: " + both);
            assertEquals(0, semaphore.availablePermits(), "3 taken once");

            // A release whose reply is lost: resent with its id, given back once.
            proxy.arm();
            semaphore.release(3);
            assertTrue(proxy.dropped());
            List<List<String>> releases = proxy.seen().subList(4, 6);
            assertEquals(releases.get(0), releases.get(1), "resent the same: " + releases);
            assertEquals(3, semaphore.availablePermits(), "3 given back once");

            // A count-down's lost reply is raised: a resend could count down twice.
            DistributedCountDownLatch latch = new DistributedCountDownLatch(on, "latch:lost");
            assertTrue(latch.trySetCount(2));
            proxy.arm();
            assertThrows(JedisConnectionException.class, latch::countDown);
            assertTrue(proxy.dropped());
            assertEquals(1, latch.getCount(), "counted down once, not resent");

            // An await's lost reply is asked again: it changes nothing.
            server.call("LATCH.COUNTDOWN", "latch:lost");
            int before = proxy.seen().size();
            proxy.arm();
            assertTrue(latch.await(5, TimeUnit.SECONDS), "reached, answered by the resend");
            assertTrue(proxy.dropped());
            List<List<String>> awaits = proxy.seen().subList(before, proxy.seen().size());
            assertEquals(2, awaits.size(), "the await and one resend: " + awaits);
            assertEquals("LATCH.AWAIT", awaits.get(1).get(0));
        }
    }
}
