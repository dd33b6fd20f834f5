package io.github.rwlock.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import redis.clients.jedis.JedisPooled;
import redis.clients.jedis.exceptions.JedisConnectionException;

/**
 * {@link DistributedPermitExpirableSemaphore} against a real server: a wait served by another
 * connection's release, and by a crashed holder's permit at its expiry with no other call; the
 * watchdog keeping a permit taken without a lease and stopping at its release, and reporting one
 * it found gone; lost replies through {@link FaultProxy} (an acquisition answered with the same ids
 * once, a release raised and not resent); interrupted and timed-out waits leaving nothing parked,
 * and a grant whose reply never came given back.
 */
class PermitExpirableSemaphoreTest extends ServerTest {
    private static final String ID = "[0-9a-f]{32}";

    @Test
    void aWaitIsServedByAnotherConnectionsRelease() throws Exception {
        DistributedPermitExpirableSemaphore permits = new DistributedPermitExpirableSemaphore(client, "permit:served");
        assertTrue(permits.trySetPermits(2));
        ExecutorService thread = Executors.newSingleThreadExecutor();
        try (Client other = Client.create(jedis)) {
            DistributedPermitExpirableSemaphore theirs = new DistributedPermitExpirableSemaphore(other, "permit:served");
            List<String> held = theirs.tryAcquire(2, 0, -1, TimeUnit.MILLISECONDS);
            assertEquals(2, held.size());
            assertEquals(2, permits.acquiredPermits());
            server.call("CONFIG", "RESETSTAT");
            Future<List<String>> taken = thread.submit(() -> permits.tryAcquire(2, 30, 10, TimeUnit.SECONDS));
            RedisServer.waitUntil("the acquisition waits on the server", 10_000, () -> blocked() == 1);
            assertTrue(theirs.tryRelease(held.get(0)));
            assertEquals(1, permits.availablePermits(), "1 of 2 is not enough: the waiter stays parked");
            assertEquals(1, blocked());
            theirs.release(held.get(1));
            List<String> ids = taken.get(30, TimeUnit.SECONDS);
            assertEquals(2, ids.size(), "served by the other client's release: " + ids);
            assertTrue(ids.get(0).matches(ID) && ids.get(1).matches(ID), "ids: " + ids);
            assertEquals(1, server.calls("permit.acquire"), "one BLOCK on the server, no polling");
            long left = permits.getLeaseTime(ids.get(0));
            assertTrue(left > 0 && left <= 10_000, "its own lease: " + left);
            assertEquals(0L, permits.getLeaseTime(held.get(0)), "a released id is not held");
            assertEquals(2, permits.tryRelease(ids));
            assertEquals(2, permits.availablePermits());
            assertEquals(2, permits.getPermits());
        } finally {
            thread.shutdownNow();
        }
    }

    @Test
    void permitsAreNeverMoreThanTheCountUnderContention() throws Exception {
        DistributedPermitExpirableSemaphore setup = new DistributedPermitExpirableSemaphore(client, "permit:guard");
        assertTrue(setup.trySetPermits(2));
        int violations = contend(2, 4, 10, (own, worker) -> {
            DistributedPermitExpirableSemaphore permits = new DistributedPermitExpirableSemaphore(own, "permit:guard");
            boolean watched = worker % 2 == 0; // the watchdog's lease, or one of 30 s
            return new Contender() {
                private String id;

                @Override
                public int take() throws Exception {
                    id = watched ? permits.tryAcquire(60, TimeUnit.SECONDS) : permits.tryAcquire(60, 30, TimeUnit.SECONDS);
                    assertNotNull(id, "served within 60 s");
                    return 1;
                }

                @Override
                public void giveBack() {
                    permits.release(id);
                }
            };
        });
        assertEquals(0, violations, "never more permits held than the count");
        assertEquals(2, setup.availablePermits(), "every permit back");
        assertEquals(0, setup.acquiredPermits());
        assertTrue(nothingWaits());
    }

    /**
     * A holder that never releases (a raw {@code PERMIT.ACQUIRE} with a 1 s lease, as a crashed
     * Redisson client leaves it): the server returns its permit at its expiry and serves the waiter
     * then, the waiter sending nothing but its one acquisition.
     */
    @Test
    void aCrashedHoldersPermitServesAWaiterAtItsExpiry() throws Exception {
        DistributedPermitExpirableSemaphore permits = new DistributedPermitExpirableSemaphore(client, "permit:crashed");
        assertTrue(permits.trySetPermits(1));
        long start = System.nanoTime();
        List<?> crashed = (List<?>) server.call("PERMIT.ACQUIRE", "permit:crashed", "1", "1000");
        assertEquals(1, crashed.size());
        server.call("CONFIG", "RESETSTAT");
        String id = permits.tryAcquire(30, -1, TimeUnit.SECONDS);
        long took = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
        assertNotNull(id, "served at the expiry");
        assertTrue(took >= 900, "served at the crashed holder's expiry, 1 s after it took the permit: " + took + " ms");
        assertEquals(1, server.calls("permit.acquire"), "one acquisition, no other call");
        assertEquals(-1L, permits.getLeaseTime(id), "-1: it never expires");
        assertEquals(1L, server.integer("ZCOUNT", "{permit:crashed}:timeout", "922337203685477", "922337203685477"),
                "Redisson's score for a permit that never expires");
        permits.release(id);
        assertThrows(NotHeldException.class, () -> permits.release(id), "released before");
        assertEquals(1, permits.availablePermits());
    }

    @Test
    void theWatchdogKeepsALeaselessPermitAndStopsAtItsRelease() throws Exception {
        try (Client quick = Client.builder(jedis).watchdogTimeout(Duration.ofMillis(900)).build()) {
            DistributedPermitExpirableSemaphore permits = new DistributedPermitExpirableSemaphore(quick, "permit:dog");
            assertTrue(permits.trySetPermits(1));
            String id = permits.tryAcquire();
            assertNotNull(id);
            long first = permits.getLeaseTime(id);
            assertTrue(first > 0 && first <= 900, "the watchdog's lease: " + first);
            // Well past the lease: held only if renewed.
            RedisServer.waitUntil("three renewals", 30_000, () -> server.calls("permit.updatelease") >= 3);
            RedisServer.sleep(1_200);
            long left = permits.getLeaseTime(id);
            assertTrue(left > 0 && left <= 900, "renewed, never expired: " + left);
            assertEquals(1, permits.acquiredPermits());
            assertFalse(permits.isLost(id));
            permits.release(id);
            RedisServer.sleep(500); // a renewal already on its way lands
            long renewals = server.calls("permit.updatelease");
            RedisServer.sleep(1_000);
            assertEquals(renewals, server.calls("permit.updatelease"), "no renewal after the release");
            assertEquals(1, permits.availablePermits());

            String kept = permits.tryAcquire();
            assertNotNull(kept);
            assertTrue(permits.updateLeaseTime(kept, -1, TimeUnit.MILLISECONDS));
            RedisServer.sleep(500);
            renewals = server.calls("permit.updatelease");
            RedisServer.sleep(1_000);
            assertEquals(renewals, server.calls("permit.updatelease"), "a lease of its own stops the watchdog");
            assertEquals(-1L, permits.getLeaseTime(kept), "the lease given, not the watchdog's");
            assertTrue(permits.tryRelease(kept));
        }
    }

    @Test
    void theWatchdogReportsAPermitFoundGone() throws Exception {
        CompletableFuture<String> told = new CompletableFuture<>();
        try (Client quick = Client.builder(jedis).watchdogTimeout(Duration.ofMillis(600)).build()) {
            DistributedPermitExpirableSemaphore permits = new DistributedPermitExpirableSemaphore(quick, "permit:gone",
                    (name, id) -> told.complete(name + " " + id));
            assertTrue(permits.trySetPermits(2));
            List<String> ids = permits.acquire(2);
            server.call("DEL", "permit:gone", "{permit:gone}:timeout");
            String lost = told.get(30, TimeUnit.SECONDS);
            assertTrue(lost.equals("permit:gone " + ids.get(0)) || lost.equals("permit:gone " + ids.get(1)), lost);
            RedisServer.waitUntil("both found gone", 30_000, () -> permits.isLost(ids.get(0)) && permits.isLost(ids.get(1)));
            assertThrows(NotHeldException.class, () -> permits.release(ids));
            assertFalse(permits.isLost(ids.get(0)), "forgotten at the release");
        }
    }

    @Test
    void aLostAcquisitionReplyGivesTheSameIdsOnceAndALostReleaseIsRaised() throws Exception {
        try (FaultProxy proxy = new FaultProxy(server.hostAndPort(), Set.of("PERMIT.ACQUIRE", "PERMIT.RELEASE"));
                JedisPooled proxied = new JedisPooled(proxy.hostAndPort());
                Client on = Client.create(proxied)) {
            DistributedPermitExpirableSemaphore permits = new DistributedPermitExpirableSemaphore(on, "permit:lost");
            assertTrue(permits.trySetPermits(3));
            proxy.arm();
            List<String> ids = permits.tryAcquire(2, 0, 20_000, TimeUnit.MILLISECONDS);
            assertTrue(proxy.dropped());
            List<List<String>> sent = proxy.seen();
            assertEquals(2, sent.size(), "the acquisition and one resend: " + sent);
            assertEquals(sent.get(0), sent.get(1), "the same command, the same request id");
            assertEquals(List.of("PERMIT.ACQUIRE", "permit:lost", "2", "20000", "REQUEST"), sent.get(0).subList(0, 5));
            assertEquals(2, ids.size());
            assertEquals(2, permits.acquiredPermits(), "2 taken once");
            assertEquals(1, permits.availablePermits());
            String latch = Plan.acquisitionLatch("permit:lost", sent.get(0).get(5));
            assertEquals(1L, server.integer("EXISTS", latch));
            permits.release(ids);
            assertEquals(0L, server.integer("EXISTS", latch), "the acquisition's latch went with the release's DEL");

            List<String> again = permits.tryAcquire(2, 0, 20_000, TimeUnit.MILLISECONDS);
            proxy.arm();
            assertThrows(JedisConnectionException.class, () -> permits.release(again), "a lost release reply is raised");
            assertTrue(proxy.dropped());
            assertEquals(5, proxy.seen().size(), "not resent: " + proxy.seen());
            assertEquals(0, permits.acquiredPermits(), "released once");
        }
    }

    @Test
    void anInterruptedOrTimedOutWaitLeavesNothing() throws Exception {
        DistributedPermitExpirableSemaphore permits = new DistributedPermitExpirableSemaphore(client, "permit:cancel");
        assertTrue(permits.trySetPermits(0));
        aWaitRunsOutAndAnInterruptEndsAnother(() -> permits.tryAcquire(300, -1, TimeUnit.MILLISECONDS) == null,
                () -> permits.acquire(2));
        permits.addPermits(2);
        assertEquals(2, permits.availablePermits(), "nobody took the permits for the ended wait");

        Thread.currentThread().interrupt();
        assertThrows(InterruptedException.class, permits::acquire, "interrupted before: nothing sent");
        assertEquals(2, permits.availablePermits());
    }

    /**
     * The server served the wait, the reply never came (the proxy holds it back), and then the
     * waiting thread is interrupted: the ids the call never heard of are learned from a replay of
     * the acquisition's latch and released.
     */
    @Test
    void anInterruptAfterAnUnheardGrantReleasesItsIds() throws Exception {
        try (FaultProxy proxy = new FaultProxy(server.hostAndPort(), Set.of("PERMIT.ACQUIRE"));
                JedisPooled proxied = new JedisPooled(proxy.hostAndPort());
                Client on = Client.create(proxied)) {
            DistributedPermitExpirableSemaphore permits = new DistributedPermitExpirableSemaphore(on, "permit:unheard");
            assertTrue(permits.trySetPermits(0));
            anInterruptAfterAnUnheardGrant(proxy, () -> permits.tryAcquire(2, 60, 60, TimeUnit.SECONDS),
                    () -> server.call("PERMIT.ADDPERMITS", "permit:unheard", "2"),
                    () -> assertEquals(2, permits.acquiredPermits(), "granted on the server"));
            assertEquals(0, permits.acquiredPermits(), "the unheard grant released");
            assertEquals(2, permits.availablePermits());
        }
    }
}
