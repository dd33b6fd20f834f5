package rwlock.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.rwlock.client.DistributedSemaphore;
import java.lang.reflect.Method;
import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import rwlock.redisson.Contention.Side;
import rwlock.redisson.Contention.Taker;
import org.redisson.api.RSemaphore;

/**
 * Redisson's {@code RSemaphore} ({@code getSemaphore}) and the module's {@code SEMAPHORE.*} on the
 * same semaphores (issue 34, design §15): both sides acquiring and releasing one semaphore for
 * 5 s under a guard counter, a waiter of each side woken by every way the other side gives
 * permits back, and every read and write of the count seen alike from both sides.
 */
class SemaphoreTest extends OneServer {
    /** Permits of the contended semaphore. */
    private static final int PERMITS = 4;
    private static final int REDISSON_THREADS = 3;
    private static final int MODULE_CLIENTS = 3;
    /** Threads of our Java client (clients/java's DistributedSemaphore), on one client. */
    private static final int JAVA_CLIENT_THREADS = 2;
    private static final long RUN_MS = 5_000;
    /**
     * A waiter's limit. A wait that starts within the run ends by the run's end plus a few
     * sections: the server's waiters stop taking permits then. Redisson's threads can wait that
     * long (a server-side waiter is served inside the release, Redisson's thread only after a
     * message and a script), so only a wait past half this limit, long after the run, is a lost
     * wake-up.
     */
    private static final long WAIT = 30_000;
    /** Handoffs timed in each direction, spread over the three ways of giving permits. */
    private static final int HANDOFFS = 30;

    private static String channel(String name) {
        return Env.derived("redisson_sc", name);
    }

    /**
     * Redisson's {@code tryAcquire(n, wait, unit)}: deprecated in 4.x for its {@code Duration}
     * form, but the only form 3.17.0 has, and still there in 4.7.0.
     */
    @SuppressWarnings("deprecation")
    private static boolean tryAcquire(RSemaphore semaphore, int permits, long waitMs) throws InterruptedException {
        return semaphore.tryAcquire(permits, waitMs, TimeUnit.MILLISECONDS);
    }

    private static long available(String name) {
        return (Long) raw.call("SEMAPHORE.AVAILABLE", name);
    }

    // ---- contention ------------------------------------------------------------------------

    /** Redisson's {@code tryAcquire(n, wait)} and {@code release(n)}. */
    private static Taker redissonTaker(String name) {
        RSemaphore semaphore = redisson.getSemaphore(name);
        return new Taker() {
            @Override
            public boolean acquire(int permits, long waitMs) throws InterruptedException {
                return tryAcquire(semaphore, permits, waitMs);
            }

            @Override
            public void release(int permits) {
                semaphore.release(permits);
            }
        };
    }

    /** The module's {@code SEMAPHORE.ACQUIRE … BLOCK} and {@code SEMAPHORE.RELEASE} on a connection of its own. */
    private static Taker moduleTaker(String name) {
        Raw conn = new Raw(server.port);
        return new Taker() {
            @Override
            public boolean acquire(int permits, long waitMs) {
                return Long.valueOf(1).equals(conn.callBlocking("SEMAPHORE.ACQUIRE", name, String.valueOf(permits),
                        "BLOCK", String.valueOf(waitMs)));
            }

            @Override
            public void release(int permits) {
                assertNull(conn.call("SEMAPHORE.RELEASE", name, String.valueOf(permits)));
            }

            @Override
            public void close() {
                conn.close();
            }
        };
    }

    /** Our Java client's {@code tryAcquire(n, wait, unit)} and {@code release(n)} (a BLOCK wait, on the server). */
    private static Taker javaClientTaker(OurClient ours, String name) {
        DistributedSemaphore semaphore = new DistributedSemaphore(ours.client, name);
        return new Taker() {
            @Override
            public boolean acquire(int permits, long waitMs) throws InterruptedException {
                return semaphore.tryAcquire(permits, waitMs, TimeUnit.MILLISECONDS);
            }

            @Override
            public void release(int permits) {
                semaphore.release(permits);
            }
        };
    }

    /**
     * Three Redisson threads ({@code tryAcquire(n, wait)} / {@code release(n)}), three module
     * clients ({@code SEMAPHORE.ACQUIRE … BLOCK} / {@code SEMAPHORE.RELEASE}) and two threads of
     * our Java client ({@code DistributedSemaphore}) on one semaphore of 4 permits for 5 s, each
     * section taking 1 or 2 permits: never more permits held than the semaphore has, every wait
     * served well before its limit, every permit back at the end.
     */
    @Test
    void everySideSharesOneSemaphoreUnderContention() throws Exception {
        String name = "sem-contended";
        try (OurClient ours = new OurClient(server)) {
            contend(name, List.of(
                    new Side("Redisson", REDISSON_THREADS, () -> redissonTaker(name)),
                    new Side("module", MODULE_CLIENTS, () -> moduleTaker(name)),
                    new Side("our Java client", JAVA_CLIENT_THREADS, () -> javaClientTaker(ours, name))));
        }
    }

    private static void contend(String name, List<Side> sides) throws Exception {
        assertEquals(1L, raw.call("SEMAPHORE.TRYSETPERMITS", name, String.valueOf(PERMITS)));
        Contention.contend(server, raw, "semaphore contention", name, PERMITS, RUN_MS, WAIT, sides);
        assertEquals(PERMITS, available(name), "every permit back (module's read)");
        assertEquals(PERMITS, redisson.getSemaphore(name).availablePermits(), "every permit back (Redisson's read)");
    }

    // ---- wake-ups ---------------------------------------------------------------------------

    /** One way a side gives {@code permits} to a semaphore whose count is 0 or missing. */
    private interface Give {
        void give(String name, int permits) throws Exception;
    }

    /** A way of giving permits: its name, whether it needs no count beforehand, and the call. */
    private record Way(String what, boolean onMissing, Give give) {}

    /** Round {@code i}'s semaphore ready for {@code way}: a count of 0, or no count for a try-set. */
    private static void prepare(String name, Way way) {
        raw.call("DEL", name);
        if (!way.onMissing()) {
            assertEquals(1L, raw.call("SEMAPHORE.TRYSETPERMITS", name, "0"));
        }
    }

    /** The module's ways to give permits: each publishes the new count on Redisson's channel. */
    private static List<Way> moduleGives() {
        return List.of(
                new Way("SEMAPHORE.RELEASE", false, (name, n) -> assertNull(
                        raw.call("SEMAPHORE.RELEASE", name, String.valueOf(n)))),
                new Way("SEMAPHORE.ADDPERMITS", false, (name, n) -> assertNull(
                        raw.call("SEMAPHORE.ADDPERMITS", name, String.valueOf(n)))),
                new Way("SEMAPHORE.TRYSETPERMITS", true, (name, n) -> assertEquals(1L,
                        raw.call("SEMAPHORE.TRYSETPERMITS", name, String.valueOf(n)))));
    }

    /** Our Java client's ways to give permits, on the module's commands. */
    private static List<Way> javaClientGives(OurClient ours) {
        return List.of(
                new Way("DistributedSemaphore.release", false, (name, n) ->
                        new DistributedSemaphore(ours.client, name).release(n)),
                new Way("DistributedSemaphore.addPermits", false, (name, n) ->
                        new DistributedSemaphore(ours.client, name).addPermits(n)),
                new Way("DistributedSemaphore.trySetPermits", true, (name, n) ->
                        assertTrue(new DistributedSemaphore(ours.client, name).trySetPermits(n))));
    }

    /**
     * A Redisson thread in {@code acquire(n)} or {@code tryAcquire(n, 30 s)} (alternately), on a
     * semaphore with no free permit, woken by the module's {@code RELEASE}, {@code ADDPERMITS} or
     * {@code TRYSETPERMITS}.
     */
    @Test
    void aRedissonWaiterIsWokenByTheModule() throws Exception {
        Env.record("semaphore: module gives, Redisson's waiter takes (RELEASE, ADDPERMITS, TRYSETPERMITS)",
                Env.summary(redissonWokenBy("sem-m2r-", moduleGives())));
    }

    /** The same, woken by our Java client's {@code release}, {@code addPermits} or {@code trySetPermits}. */
    @Test
    void aRedissonWaiterIsWokenByOurJavaClient() throws Exception {
        try (OurClient ours = new OurClient(server)) {
            Env.record("semaphore: our Java client gives, Redisson's waiter takes (release, addPermits, trySetPermits)",
                    Env.summary(redissonWokenBy("sem-j2r-", javaClientGives(ours))));
        }
    }

    /** Timed rounds of a Redisson waiter woken by {@code ways} in turn: ms from the giving call to Redisson's hold. */
    private static List<Double> redissonWokenBy(String prefix, List<Way> ways) throws Exception {
        List<Double> samples = new ArrayList<>();
        try (Env.JavaThread waiter = new Env.JavaThread()) {
            for (int i = 0; i < HANDOFFS; i++) {
                String name = prefix + i;
                Way way = ways.get(i % ways.size());
                int permits = 1 + i % 2;
                boolean untimed = i % 4 < 2;
                RSemaphore semaphore = redisson.getSemaphore(name);
                prepare(name, way);
                long scripts = Env.scriptCalls(raw);
                Future<Long> acquired = waiter.submit(() -> {
                    if (untimed) {
                        semaphore.acquire(permits);
                    } else {
                        assertTrue(tryAcquire(semaphore, permits, WAIT));
                    }
                    return System.nanoTime();
                });
                // Redisson tries once, subscribes, tries again, then waits for a message.
                Env.await("Redisson waiting on " + name, 5_000, () -> Env.subscribers(raw, channel(name)) > 0
                        && Env.scriptCalls(raw) >= scripts + 2);
                assertEquals(0, semaphore.availablePermits());
                long t0 = System.nanoTime();
                way.give().give(name, permits);
                double ms = (acquired.get(WAIT, TimeUnit.MILLISECONDS) - t0) / 1e6;
                assertTrue(ms < Env.HANDOFF_MS, way.what() + " woke Redisson's " + (untimed ? "acquire" : "tryAcquire")
                        + " after " + ms + " ms");
                samples.add(ms);
                assertEquals(0L, available(name), "Redisson took the permits given");
                semaphore.release(permits);
                assertEquals(permits, available(name));
                raw.call("DEL", name);
            }
        }
        return samples;
    }

    /** Redisson's ways to give permits: its scripts publish to Redisson's channel, the module hears their keyspace events. */
    private static List<Way> redissonGives() {
        return List.of(
                new Way("release", false, (name, n) -> redisson.getSemaphore(name).release(n)),
                new Way("addPermits", false, (name, n) -> redisson.getSemaphore(name).addPermits(n)),
                new Way("trySetPermits", true, (name, n) -> assertTrue(redisson.getSemaphore(name).trySetPermits(n))));
    }

    /** A waiter parked on the server for {@code permits} of {@code name}, on a connection or client of its own. */
    private interface Parked {
        boolean acquire(String name, int permits) throws Exception;
    }

    /**
     * A module client in {@code SEMAPHORE.ACQUIRE … BLOCK}, on a semaphore with no free permit,
     * woken by Redisson's {@code release(n)}, {@code addPermits(n)} or {@code trySetPermits(n)}
     * (the {@code incrby} and {@code set} keyspace events of their scripts).
     */
    @Test
    void aModuleWaiterIsWokenByRedisson() throws Exception {
        try (Raw waiterConn = new Raw(server.port)) {
            Env.record("semaphore: Redisson gives, module BLOCK waiter takes (release, addPermits, trySetPermits)",
                    Env.summary(wokenByRedisson("sem-r2m-", (name, n) -> Long.valueOf(1).equals(waiterConn.callBlocking(
                            "SEMAPHORE.ACQUIRE", name, String.valueOf(n), "BLOCK", String.valueOf(WAIT))))));
        }
    }

    /** The same with our Java client's {@code tryAcquire(n, 30 s)} waiting (on the server) instead. */
    @Test
    void ourJavaClientsWaiterIsWokenByRedisson() throws Exception {
        try (OurClient ours = new OurClient(server)) {
            Env.record("semaphore: Redisson gives, our Java client's tryAcquire takes (release, addPermits, trySetPermits)",
                    Env.summary(wokenByRedisson("sem-r2j-", (name, n) ->
                            new DistributedSemaphore(ours.client, name).tryAcquire(n, WAIT, TimeUnit.MILLISECONDS))));
        }
    }

    /** Timed rounds of a parked waiter woken by Redisson's ways in turn: ms from Redisson's call to the waiter's reply. */
    private static List<Double> wokenByRedisson(String prefix, Parked parked) throws Exception {
        List<Way> ways = redissonGives();
        List<Double> samples = new ArrayList<>();
        ExecutorService waiterThread = Executors.newSingleThreadExecutor();
        try {
            for (int i = 0; i < HANDOFFS; i++) {
                String name = prefix + i;
                Way way = ways.get(i % ways.size());
                int permits = 1 + i % 2;
                prepare(name, way);
                Future<Object[]> acquired = waiterThread.submit(() -> {
                    boolean got = parked.acquire(name, permits);
                    return new Object[] {got, System.nanoTime()};
                });
                Env.await("waiter parked on " + name, 5_000, () -> Env.blockedClients(raw) == 1);
                long t0 = System.nanoTime();
                way.give().give(name, permits);
                Object[] got = acquired.get(WAIT, TimeUnit.MILLISECONDS);
                assertEquals(true, got[0], "the waiter took the permits Redisson's " + way.what() + " gave");
                double ms = ((Long) got[1] - t0) / 1e6;
                assertTrue(ms < Env.HANDOFF_MS, way.what() + " woke the waiter after " + ms + " ms");
                samples.add(ms);
                assertEquals(0, redisson.getSemaphore(name).availablePermits());
                assertNull(raw.call("SEMAPHORE.RELEASE", name, String.valueOf(permits)));
                assertEquals(permits, redisson.getSemaphore(name).availablePermits());
                raw.call("DEL", name);
            }
        } finally {
            waiterThread.shutdownNow();
        }
        return samples;
    }

    // ---- reads and writes -------------------------------------------------------------------

    /**
     * trySetPermits, availablePermits, tryAcquire, release, addPermits (negative too) and
     * drainPermits against their commands and our Java client's, each side reading what the others
     * wrote.
     */
    @Test
    void everySideReadsWhatTheOthersWrote() {
        String name = "sem-shared";
        RSemaphore semaphore = redisson.getSemaphore(name);
        try (OurClient ours = new OurClient(server)) {
            readsAndWrites(name, semaphore, new DistributedSemaphore(ours.client, name));
        }
        raw.call("DEL", name);
    }

    private static void readsAndWrites(String name, RSemaphore semaphore, DistributedSemaphore ourSemaphore) {
        assertEquals(0, semaphore.availablePermits(), "no semaphore: 0 (Redisson)");
        assertEquals(0L, available(name), "no semaphore: 0 (module)");
        assertEquals(0, semaphore.drainPermits());
        assertEquals(0L, raw.call("SEMAPHORE.DRAIN", name));
        assertEquals(0L, raw.call("EXISTS", name), "draining no semaphore creates none");

        assertTrue(semaphore.trySetPermits(5));
        assertEquals(5L, available(name));
        assertEquals(5, ourSemaphore.availablePermits());
        assertEquals(0L, raw.call("SEMAPHORE.TRYSETPERMITS", name, "7"), "a count exists: the module's try-set refused");
        assertFalse(semaphore.trySetPermits(7));
        assertFalse(ourSemaphore.trySetPermits(7));
        assertEquals(1L, raw.call("SEMAPHORE.ACQUIRE", name, "3"));
        assertEquals(2, semaphore.availablePermits());
        assertFalse(semaphore.tryAcquire(3), "2 free, 3 asked");
        assertTrue(ourSemaphore.tryAcquire(1), "our client takes one of Redisson's permits");
        assertTrue(semaphore.tryAcquire(1));
        assertEquals(0L, available(name));
        assertEquals(0L, raw.call("SEMAPHORE.ACQUIRE", name, "1"));
        assertNull(raw.call("SEMAPHORE.RELEASE", name, "1"), "anyone may release: the module gives Redisson's back");
        ourSemaphore.release(1);
        semaphore.release(3);
        assertEquals(5L, available(name));

        assertNull(raw.call("SEMAPHORE.ADDPERMITS", name, "-8"));
        assertEquals(-3, semaphore.availablePermits(), "the module's negative add, read by Redisson");
        assertFalse(semaphore.tryAcquire());
        semaphore.addPermits(10);
        assertEquals(7L, available(name));
        semaphore.addPermits(-9);
        assertEquals(-2L, available(name), "Redisson's negative add, read by the module");
        assertEquals(-2, ourSemaphore.availablePermits(), "and by our client");
        assertEquals("-2", raw.call("GET", name));
        assertEquals(-2L, raw.call("SEMAPHORE.DRAIN", name), "the module drains Redisson's negative count");
        assertEquals(0, semaphore.availablePermits());
        assertEquals("0", raw.call("GET", name), "a drained semaphore is 0, not gone");
        assertNull(raw.call("SEMAPHORE.ADDPERMITS", name, "6"));
        assertEquals(6, semaphore.drainPermits(), "Redisson drains the module's permits");
        assertEquals(0L, available(name));
        ourSemaphore.addPermits(4);
        assertEquals(4, semaphore.drainPermits(), "Redisson drains our client's permits");
        assertEquals(0L, raw.call("SEMAPHORE.TRYSETPERMITS", name, "1"), "a count of 0 is a semaphore: no try-set");
        assertFalse(semaphore.trySetPermits(1));
        assertEquals(-1L, raw.pttl(name), "no TTL from any of these");
    }

    /**
     * {@code trySetPermits(n, ttl)} (3.29+), {@code TRYSETPERMITS … TTL} and our Java client's
     * {@code trySetPermits(n, ttl)}: each side reads the others' TTL; a release keeps it and an
     * add drops it on every side (the scripts' INCRBY and SET).
     */
    @Test
    void aTryAndSetWithTtlIsSeenFromBothSides() throws Exception {
        Method trySetWithTtl = Env.requireMethod(Env.SEMAPHORE_TTL_SINCE, "RSemaphore.trySetPermits(permits, ttl)",
                RSemaphore.class, "trySetPermits", int.class, Duration.class);
        long ttl = 10_000;
        String name = "sem-ttl-redisson";
        RSemaphore semaphore = redisson.getSemaphore(name);
        long set = System.nanoTime();
        assertEquals(true, trySetWithTtl.invoke(semaphore, 3, Duration.ofMillis(ttl)));
        assertEquals(0L, raw.call("SEMAPHORE.TRYSETPERMITS", name, "3", "TTL", String.valueOf(ttl)));
        assertEquals(3L, available(name));
        assertEquals(1L, raw.call("SEMAPHORE.ACQUIRE", name, "1"));
        assertNull(raw.call("SEMAPHORE.RELEASE", name, "1"));
        long pttl = raw.pttl(name);
        assertTrue(pttl <= ttl && pttl >= Env.leastTtlLeft(ttl, set), "Redisson's TTL kept by the module's acquire"
                + " and release: " + pttl);
        assertNull(raw.call("SEMAPHORE.ADDPERMITS", name, "1"));
        assertEquals(-1L, raw.pttl(name), "the module's add drops Redisson's TTL, as Redisson's own add does");
        raw.call("DEL", name);

        name = "sem-ttl-module";
        semaphore = redisson.getSemaphore(name);
        set = System.nanoTime();
        assertEquals(1L, raw.call("SEMAPHORE.TRYSETPERMITS", name, "3", "TTL", String.valueOf(ttl)));
        assertEquals(false, trySetWithTtl.invoke(semaphore, 3, Duration.ofMillis(ttl)));
        assertTrue(semaphore.tryAcquire(2));
        semaphore.release(2);
        long remain = semaphore.remainTimeToLive();
        assertTrue(remain <= ttl && remain >= Env.leastTtlLeft(ttl, set), "the module's TTL, read by Redisson"
                + " after its acquire and release: " + remain);
        semaphore.addPermits(1);
        assertEquals(-1, semaphore.remainTimeToLive(), "Redisson's add drops the module's TTL");
        assertEquals(4L, available(name));
        raw.call("DEL", name);

        name = "sem-ttl-java-client";
        semaphore = redisson.getSemaphore(name);
        try (OurClient ours = new OurClient(server)) {
            DistributedSemaphore ourSemaphore = new DistributedSemaphore(ours.client, name);
            set = System.nanoTime();
            assertTrue(ourSemaphore.trySetPermits(3, Duration.ofMillis(ttl)));
            assertEquals(false, trySetWithTtl.invoke(semaphore, 3, Duration.ofMillis(ttl)));
            remain = semaphore.remainTimeToLive();
            assertTrue(remain <= ttl && remain >= Env.leastTtlLeft(ttl, set), "our client's TTL, read by Redisson: "
                    + remain);
            semaphore.addPermits(1);
            assertEquals(-1L, raw.pttl(name), "Redisson's add drops our client's TTL");
            assertEquals(4, ourSemaphore.availablePermits());
        }
        raw.call("DEL", name);
    }

    /** {@code releaseIfExists(n)} (4.0+) and {@code RELEASE … IFEXISTS}: alike on a missing and an existing semaphore. */
    @Test
    void releaseIfExistsAgreesOnBothSides() throws Exception {
        Method releaseIfExists = Env.requireMethod(Env.RELEASE_IF_EXISTS_SINCE, "RSemaphore.releaseIfExists",
                RSemaphore.class, "releaseIfExists", int.class);
        String name = "sem-if-exists";
        RSemaphore semaphore = redisson.getSemaphore(name);
        assertEquals(false, releaseIfExists.invoke(semaphore, 2));
        assertEquals(0L, raw.call("SEMAPHORE.RELEASE", name, "2", "IFEXISTS"));
        assertEquals(0L, raw.call("EXISTS", name), "neither side creates the semaphore");
        assertEquals(1L, raw.call("SEMAPHORE.TRYSETPERMITS", name, "0"));
        assertEquals(true, releaseIfExists.invoke(semaphore, 2));
        assertEquals(2L, available(name));
        assertEquals(1L, raw.call("SEMAPHORE.RELEASE", name, "1", "IFEXISTS"));
        assertEquals(3, semaphore.availablePermits());
        raw.call("DEL", name);
    }
}
