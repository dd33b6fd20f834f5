package rwlock.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.rwlock.client.DistributedPermitExpirableSemaphore;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.redisson.api.RPermitExpirableSemaphore;
import rwlock.redisson.Contention.Side;
import rwlock.redisson.Contention.Taker;

/**
 * Redisson's {@code RPermitExpirableSemaphore} ({@code getPermitExpirableSemaphore}) and the
 * module's {@code PERMIT.*} on the same semaphores (issue 34, design §17), with our Java client's
 * {@code DistributedPermitExpirableSemaphore}: every side acquiring and releasing one semaphore for
 * 5 s under a guard counter, a waiter of each side woken by the other sides' ways of giving
 * permits, a crashed Redisson holder's permit coming back at its expiry, and the ids, leases and
 * counts each side writes read and written by the others.
 */
class PermitExpirableSemaphoreTest extends OneServer {
    /** Permits of the contended semaphore. */
    private static final int PERMITS = 4;
    private static final int REDISSON_THREADS = 3;
    private static final int MODULE_CLIENTS = 3;
    /** Threads of our Java client, on one client. */
    private static final int JAVA_CLIENT_THREADS = 2;
    private static final long RUN_MS = 5_000;
    /** A waiter's limit; as SemaphoreTest's, a wait past half of it is a lost wake-up. */
    private static final long WAIT = 30_000;
    /**
     * The contention's leases: far longer than any section on a loaded machine, so no permit
     * expires while its holder is inside (an expiry there would be a legitimate extra holder, not a
     * violation of the semaphore).
     */
    private static final long LEASE = 60_000;
    /** Handoffs timed in each direction, spread over the ways of giving permits. */
    private static final int HANDOFFS = 30;
    /**
     * A crashed holder's lease: long enough for a waiter to be parked before it runs out on a
     * loaded machine (checked), short enough for several rounds.
     */
    private static final long CRASH_LEASE = 2_000;
    private static final int CRASH_ROUNDS = 5;
    /** Redisson's score of a permit that never expires (its nonExpirableTimeout), every version. */
    private static final String NEVER = "922337203685477";

    private static String channel(String name) {
        return Env.derived("redisson_sc", name);
    }

    /** The set of permits taken, named as Redisson's suffixName names it. */
    private static String timeouts(String name) {
        return name.contains("{") ? name + ":timeout" : "{" + name + "}:timeout";
    }

    private static RPermitExpirableSemaphore semaphore(String name) {
        return redisson.getPermitExpirableSemaphore(name);
    }

    private static long available(String name) {
        return (Long) raw.call("PERMIT.AVAILABLE", name);
    }

    /** The scores of the permits taken, lowest first (the members are 16 raw bytes, not the hex ids). */
    private static List<String> scores(String name) {
        List<?> withScores = (List<?>) raw.call("ZRANGE", timeouts(name), "0", "-1", "WITHSCORES");
        List<String> out = new ArrayList<>();
        for (int i = 1; i < withScores.size(); i += 2) {
            out.add((String) withScores.get(i));
        }
        return out;
    }

    private static void delete(String name) {
        raw.call("DEL", name, timeouts(name));
    }

    /** An id as every side shows it: 32 lower-case hex digits (16 bytes). */
    private static String checkId(String id) {
        assertNotNull(id);
        assertTrue(id.matches("[0-9a-f]{32}"), "a permit id of 32 hex digits: " + id);
        return id;
    }

    /** {@code PERMIT.ACQUIRE}'s ids when granted (an array, for any count); null when refused. */
    @SuppressWarnings("unchecked")
    private static List<String> ids(Object reply) {
        if (reply instanceof List) {
            ((List<String>) reply).forEach(PermitExpirableSemaphoreTest::checkId);
            return (List<String>) reply;
        }
        return null;
    }

    private static List<String> moduleAcquire(Raw conn, String name, int permits, long lease) {
        return ids(conn.call("PERMIT.ACQUIRE", name, String.valueOf(permits), String.valueOf(lease)));
    }

    private static String moduleAcquireOne(String name, long lease) {
        List<String> ids = moduleAcquire(raw, name, 1, lease);
        assertNotNull(ids, "the module's acquisition granted");
        assertEquals(1, ids.size());
        return ids.get(0);
    }

    // ---- contention ------------------------------------------------------------------------

    /** Redisson's {@code tryAcquire(wait, lease, unit)} and {@code release(id)}: one permit, every version. */
    private static Taker redissonTaker(String name) {
        RPermitExpirableSemaphore semaphore = semaphore(name);
        return new Taker() {
            private String id;

            @Override
            public boolean acquire(int permits, long waitMs) throws InterruptedException {
                id = semaphore.tryAcquire(waitMs, LEASE, TimeUnit.MILLISECONDS);
                return id != null;
            }

            @Override
            public void release(int permits) {
                semaphore.release(id);
            }
        };
    }

    /** The module's {@code PERMIT.ACQUIRE … BLOCK} and {@code PERMIT.RELEASE} of its ids, on a connection of its own. */
    private static Taker moduleTaker(String name) {
        Raw conn = new Raw(server.port);
        return new Taker() {
            private List<String> ids;

            @Override
            public boolean acquire(int permits, long waitMs) {
                ids = ids(conn.callBlocking("PERMIT.ACQUIRE", name, String.valueOf(permits), String.valueOf(LEASE),
                        "BLOCK", String.valueOf(waitMs)));
                return ids != null;
            }

            @Override
            public void release(int permits) {
                List<String> args = new ArrayList<>(List.of(name));
                args.addAll(ids);
                assertEquals((long) permits, conn.call("PERMIT.RELEASE", args.toArray(new String[0])));
            }

            @Override
            public void close() {
                conn.close();
            }
        };
    }

    /** Our Java client's {@code tryAcquire(n, wait, lease, unit)} (a BLOCK wait) and {@code release(ids)}. */
    private static Taker javaClientTaker(OurClient ours, String name) {
        DistributedPermitExpirableSemaphore semaphore = new DistributedPermitExpirableSemaphore(ours.client, name);
        return new Taker() {
            private List<String> ids;

            @Override
            public boolean acquire(int permits, long waitMs) throws InterruptedException {
                ids = semaphore.tryAcquire(permits, waitMs, LEASE, TimeUnit.MILLISECONDS);
                return !ids.isEmpty();
            }

            @Override
            public void release(int permits) {
                semaphore.release(ids);
            }
        };
    }

    /**
     * Three Redisson threads (one permit each time, the form every version has), three module
     * clients and two threads of our Java client (1 or 2 permits) on one semaphore of 4 permits for
     * 5 s: never more permits held than the semaphore has, every wait served well before its
     * limit, every permit back at the end and no id left in the set.
     */
    @Test
    void everySideSharesOneSemaphoreUnderContention() throws Exception {
        String name = "permit-contended";
        try (OurClient ours = new OurClient(server)) {
            assertEquals(1L, raw.call("PERMIT.TRYSETPERMITS", name, String.valueOf(PERMITS)));
            Contention.contend(server, raw, "permit contention", name, PERMITS, RUN_MS, WAIT, List.of(
                    new Side("Redisson", REDISSON_THREADS, 1, () -> redissonTaker(name)),
                    new Side("module", MODULE_CLIENTS, () -> moduleTaker(name)),
                    new Side("our Java client", JAVA_CLIENT_THREADS, () -> javaClientTaker(ours, name))));
        }
        assertEquals(PERMITS, available(name), "every permit back (module's read)");
        assertEquals(PERMITS, semaphore(name).availablePermits(), "every permit back (Redisson's read)");
        assertEquals(0L, raw.call("ZCARD", timeouts(name)), "no permit left taken");
        delete(name);
    }

    // ---- wake-ups ---------------------------------------------------------------------------

    /** One way a side gives a permit to a semaphore whose only permit {@code held} is taken. */
    private interface Give {
        void give(String name, String held) throws Exception;
    }

    private record Way(String what, Give give) {}

    /** Redisson's {@code setPermits} where the version has it (3.19.1+), else null. */
    private static Method redissonSetPermits() {
        return Env.methodSince(Env.PERMIT_COUNTS_SINCE, RPermitExpirableSemaphore.class, "setPermits", int.class);
    }

    /** The module's ways: each publishes on Redisson's channel. */
    private static List<Way> moduleGives() {
        return List.of(
                new Way("PERMIT.RELEASE", (name, held) -> assertEquals(1L, raw.call("PERMIT.RELEASE", name, held))),
                new Way("PERMIT.ADDPERMITS", (name, held) -> assertNull(raw.call("PERMIT.ADDPERMITS", name, "1"))),
                new Way("PERMIT.SETPERMITS", (name, held) -> assertNull(raw.call("PERMIT.SETPERMITS", name, "2"))));
    }

    /** Our Java client's ways, on the module's commands. */
    private static List<Way> javaClientGives(OurClient ours) {
        return List.of(
                new Way("release", (name, held) -> new DistributedPermitExpirableSemaphore(ours.client, name)
                        .release(held)),
                new Way("addPermits", (name, held) -> new DistributedPermitExpirableSemaphore(ours.client, name)
                        .addPermits(1)),
                new Way("setPermits", (name, held) -> new DistributedPermitExpirableSemaphore(ours.client, name)
                        .setPermits(2)));
    }

    /** Redisson's ways: its scripts publish on its channel only; the module hears their keyspace events. */
    private static List<Way> redissonGives() {
        List<Way> ways = new ArrayList<>(List.of(
                new Way("release", (name, held) -> semaphore(name).release(held)),
                new Way("addPermits", (name, held) -> semaphore(name).addPermits(1))));
        Method setPermits = redissonSetPermits();
        if (setPermits != null) {
            ways.add(new Way("setPermits", (name, held) -> setPermits.invoke(semaphore(name), 2)));
        }
        return ways;
    }

    private static String names(List<Way> ways) {
        List<String> names = new ArrayList<>();
        ways.forEach(way -> names.add(way.what()));
        return String.join(", ", names);
    }

    /**
     * A Redisson thread in {@code tryAcquire(30 s, lease)} or {@code acquire(lease)} (alternately)
     * on a semaphore whose one permit the module holds without lease, woken by the module's
     * {@code RELEASE} of that permit, {@code ADDPERMITS} or {@code SETPERMITS}.
     */
    @Test
    void aRedissonWaiterIsWokenByTheModule() throws Exception {
        List<Way> ways = moduleGives();
        Env.record("permit: module gives, Redisson's waiter takes (" + names(ways) + ")",
                Env.summary(redissonWokenBy("permit-m2r-", ways)));
    }

    /** The same, woken by our Java client's {@code release}, {@code addPermits} or {@code setPermits}. */
    @Test
    void aRedissonWaiterIsWokenByOurJavaClient() throws Exception {
        try (OurClient ours = new OurClient(server)) {
            List<Way> ways = javaClientGives(ours);
            Env.record("permit: our Java client gives, Redisson's waiter takes (" + names(ways) + ")",
                    Env.summary(redissonWokenBy("permit-j2r-", ways)));
        }
    }

    /** Timed rounds of a Redisson waiter woken by {@code ways} in turn: ms from the giving call to Redisson's id. */
    private static List<Double> redissonWokenBy(String prefix, List<Way> ways) throws Exception {
        List<Double> samples = new ArrayList<>();
        try (Env.JavaThread waiter = new Env.JavaThread()) {
            for (int i = 0; i < HANDOFFS; i++) {
                String name = prefix + i;
                Way way = ways.get(i % ways.size());
                boolean untimed = i % 4 < 2;
                RPermitExpirableSemaphore semaphore = semaphore(name);
                assertEquals(1L, raw.call("PERMIT.TRYSETPERMITS", name, "1"));
                String held = moduleAcquireOne(name, -1);
                long scripts = Env.scriptCalls(raw);
                Future<Object[]> acquired = waiter.submit(() -> {
                    String id = untimed ? semaphore.acquire(LEASE, TimeUnit.MILLISECONDS)
                            : semaphore.tryAcquire(WAIT, LEASE, TimeUnit.MILLISECONDS);
                    return new Object[] {id, System.nanoTime()};
                });
                // Redisson tries once, subscribes, tries again, then waits for a message (the
                // permit held never expires: the script replies nil, nothing to poll for).
                Env.await("Redisson waiting on " + name, 5_000, () -> Env.subscribers(raw, channel(name)) > 0
                        && Env.scriptCalls(raw) >= scripts + 2);
                assertEquals(0, semaphore.availablePermits());
                long t0 = System.nanoTime();
                way.give().give(name, held);
                Object[] got = acquired.get(WAIT, TimeUnit.MILLISECONDS);
                double ms = ((Long) got[1] - t0) / 1e6;
                assertTrue(ms < Env.HANDOFF_MS, way.what() + " woke Redisson's " + (untimed ? "acquire" : "tryAcquire")
                        + " after " + ms + " ms");
                samples.add(ms);
                String id = checkId((String) got[0]);
                long left = (Long) raw.call("PERMIT.LEASETIME", name, id);
                assertTrue(left > 0 && left <= LEASE, "the module reads the lease of Redisson's permit: " + left);
                assertEquals(1L, raw.call("PERMIT.TRYRELEASE", name, id), "the module releases Redisson's permit");
                delete(name);
            }
        }
        return samples;
    }

    /** A waiter parked on the server for one permit of {@code name}: its id, or null when refused. */
    private interface Parked {
        String acquire(String name) throws Exception;
    }

    /**
     * A module client in {@code PERMIT.ACQUIRE … BLOCK} on a semaphore whose one permit Redisson
     * holds without lease, woken by Redisson's {@code release(id)}, {@code addPermits} or
     * {@code setPermits} (3.19.1+): the {@code zrem}, {@code incrby} and {@code set} keyspace events
     * of their scripts.
     */
    @Test
    void aModuleWaiterIsWokenByRedisson() throws Exception {
        try (Raw waiterConn = new Raw(server.port)) {
            List<Way> ways = redissonGives();
            Env.record("permit: Redisson gives, module BLOCK waiter takes (" + names(ways) + ")",
                    Env.summary(wokenByRedisson("permit-r2m-", ways, name -> {
                        List<String> ids = ids(waiterConn.callBlocking("PERMIT.ACQUIRE", name, "1",
                                String.valueOf(LEASE), "BLOCK", String.valueOf(WAIT)));
                        return ids == null ? null : ids.get(0);
                    })));
        }
    }

    /** The same with our Java client's {@code tryAcquire(30 s, lease)} waiting (on the server). */
    @Test
    void ourJavaClientsWaiterIsWokenByRedisson() throws Exception {
        try (OurClient ours = new OurClient(server)) {
            List<Way> ways = redissonGives();
            Env.record("permit: Redisson gives, our Java client's tryAcquire takes (" + names(ways) + ")",
                    Env.summary(wokenByRedisson("permit-r2j-", ways, name -> new DistributedPermitExpirableSemaphore(
                            ours.client, name).tryAcquire(WAIT, LEASE, TimeUnit.MILLISECONDS))));
        }
    }

    /** Timed rounds of a parked waiter woken by Redisson's ways in turn: ms from Redisson's call to the waiter's id. */
    private static List<Double> wokenByRedisson(String prefix, List<Way> ways, Parked parked) throws Exception {
        List<Double> samples = new ArrayList<>();
        ExecutorService waiterThread = Executors.newSingleThreadExecutor();
        try {
            for (int i = 0; i < HANDOFFS; i++) {
                String name = prefix + i;
                Way way = ways.get(i % ways.size());
                RPermitExpirableSemaphore semaphore = semaphore(name);
                assertTrue(semaphore.trySetPermits(1));
                String held = checkId(semaphore.tryAcquire());
                assertEquals(List.of(NEVER), scores(name), "Redisson's permit without lease never expires");
                Future<Object[]> acquired = waiterThread.submit(() -> {
                    String id = parked.acquire(name);
                    return new Object[] {id, System.nanoTime()};
                });
                Env.await("waiter parked on " + name, 5_000, () -> Env.blockedClients(raw) == 1);
                long t0 = System.nanoTime();
                way.give().give(name, held);
                Object[] got = acquired.get(WAIT, TimeUnit.MILLISECONDS);
                assertNotNull(got[0], "the waiter took the permit Redisson's " + way.what() + " gave");
                double ms = ((Long) got[1] - t0) / 1e6;
                assertTrue(ms < Env.HANDOFF_MS, way.what() + " woke the waiter after " + ms + " ms");
                samples.add(ms);
                String id = checkId((String) got[0]);
                assertTrue(semaphore.updateLeaseTime(id, 2 * LEASE, TimeUnit.MILLISECONDS),
                        "Redisson updates the lease of the waiter's permit");
                long left = (Long) raw.call("PERMIT.LEASETIME", name, id);
                assertTrue(left > LEASE && left <= 2 * LEASE, "Redisson's new lease, read by the module: " + left);
                semaphore.release(id);
                delete(name);
            }
        } finally {
            waiterThread.shutdownNow();
        }
        return samples;
    }

    // ---- a crashed holder's expiry ------------------------------------------------------------

    /** A Redisson holder that takes the semaphore's one permit for CRASH_LEASE and never calls again: its permit's expiry. */
    private static long crashedHolder(String name) throws Exception {
        RPermitExpirableSemaphore semaphore = semaphore(name);
        assertTrue(semaphore.trySetPermits(1));
        checkId(semaphore.tryAcquire(0, CRASH_LEASE, TimeUnit.MILLISECONDS));
        List<String> scores = scores(name);
        assertEquals(1, scores.size());
        return Long.parseLong(scores.get(0));
    }

    /**
     * A Redisson holder "crashes" (takes the one permit with a 2 s lease, then nothing more) while
     * a module client waits in {@code PERMIT.ACQUIRE … BLOCK}: the module's agenda runs at the
     * permit's expiry, reclaims it and serves the waiter then, with no other call: no script
     * runs (INFO commandstats) and no other command touches the semaphore. Asserted served within
     * 3 s of the expiry, and not before it; the delays recorded.
     */
    @Test
    void aCrashedRedissonHoldersPermitReachesAModuleWaiterAtItsExpiry() throws Exception {
        List<Double> delays = new ArrayList<>();
        ExecutorService waiterThread = Executors.newSingleThreadExecutor();
        try (Raw waiterConn = new Raw(server.port)) {
            for (int i = 0; i < CRASH_ROUNDS; i++) {
                String name = "permit-crash-module-" + i;
                long expiry = crashedHolder(name);
                long scripts = Env.scriptCalls(raw);
                Future<Object[]> served = waiterThread.submit(() -> {
                    Object reply = waiterConn.callBlocking("PERMIT.ACQUIRE", name, "1", String.valueOf(LEASE), "BLOCK",
                            String.valueOf(WAIT));
                    return new Object[] {reply, System.currentTimeMillis()};
                });
                Env.await("module waiter parked on " + name, 5_000, () -> Env.blockedClients(raw) == 1);
                assertTrue(System.currentTimeMillis() < expiry, "the waiter parked before the crashed permit expired");
                Object[] got = served.get(WAIT, TimeUnit.MILLISECONDS);
                List<String> ids = ids(got[0]);
                assertNotNull(ids, "the module waiter was served the expired permit: " + got[0]);
                long delay = (Long) got[1] - expiry;
                assertTrue(delay >= 0, "served " + -delay + " ms before the permit expired");
                assertTrue(delay < Env.HANDOFF_MS, "served " + delay + " ms after the expiry");
                delays.add((double) delay);
                assertEquals(scripts, Env.scriptCalls(raw), "no Redisson script ran meanwhile");
                assertEquals(1, scores(name).size(), "only the waiter's permit is taken");
                assertEquals(1L, raw.call("PERMIT.RELEASE", name, ids.get(0)));
                delete(name);
            }
        } finally {
            waiterThread.shutdownNow();
        }
        Env.record("permit: crashed Redisson holder, module BLOCK waiter served after the expiry",
                Env.summary(delays));
    }

    /**
     * The same crash with a Redisson waiter ({@code tryAcquire(30 s, lease)}) and no module
     * waiter: Redisson's script replies the first expiry and the waiter sleeps until then and
     * runs its script again (its own poll), which reclaims the permit. What is recorded: the delay
     * after the expiry and how many scripts the waiter ran. Asserted: served within 3 s of the
     * expiry, no message on the channel needed (nobody else calls), and the poll ran at or after
     * the expiry (the scripts run before it only refused).
     */
    @Test
    void aRedissonWaiterAloneTakesACrashedPermitByItsOwnPoll() throws Exception {
        List<Double> delays = new ArrayList<>();
        List<Double> scriptRuns = new ArrayList<>();
        try (Env.JavaThread waiter = new Env.JavaThread()) {
            for (int i = 0; i < CRASH_ROUNDS; i++) {
                String name = "permit-crash-redisson-" + i;
                long expiry = crashedHolder(name);
                RPermitExpirableSemaphore semaphore = semaphore(name);
                long scripts = Env.scriptCalls(raw);
                Future<Object[]> served = waiter.submit(() -> {
                    String id = semaphore.tryAcquire(WAIT, LEASE, TimeUnit.MILLISECONDS);
                    return new Object[] {id, System.currentTimeMillis()};
                });
                Env.await("Redisson waiting on " + name, 5_000, () -> Env.subscribers(raw, channel(name)) > 0
                        && Env.scriptCalls(raw) >= scripts + 2);
                assertTrue(System.currentTimeMillis() < expiry, "Redisson waited before the crashed permit expired");
                Object[] got = served.get(WAIT, TimeUnit.MILLISECONDS);
                checkId((String) got[0]);
                long delay = (Long) got[1] - expiry;
                assertTrue(delay >= 0, "served " + -delay + " ms before the permit expired");
                assertTrue(delay < Env.HANDOFF_MS, "Redisson's waiter took the expired permit " + delay
                        + " ms after the expiry");
                delays.add((double) delay);
                scriptRuns.add((double) (Env.scriptCalls(raw) - scripts));
                delete(name);
            }
        }
        Env.record("permit: crashed Redisson holder, Redisson waiter alone served by its own poll after the expiry",
                Env.summary(delays) + String.format(Locale.ROOT, "; scripts the waiter ran: %.0f to %.0f",
                        scriptRuns.stream().mapToDouble(Double::doubleValue).min().orElseThrow(),
                        scriptRuns.stream().mapToDouble(Double::doubleValue).max().orElseThrow()));
    }

    /**
     * The same crash with nobody waiting: no side reclaims the permit on its own, module or
     * Redisson; the count stays 0 and the id in the set well past the expiry, until the next call
     * that touches the semaphore (a read of either side) takes it back.
     */
    @Test
    void withNobodyWaitingACrashedPermitComesBackAtTheNextCall() throws Exception {
        for (int i = 0; i < 2; i++) {
            String name = "permit-crash-idle-" + i;
            long expiry = crashedHolder(name);
            // Nothing to wait for: the point is that nothing happens. Past the expiry by a
            // margin (the module's agenda would have run by then if anything were scheduled).
            Thread.sleep(Math.max(0, expiry - System.currentTimeMillis()) + 500);
            assertEquals("0", raw.call("GET", name), "nobody took the expired permit back");
            assertEquals(1L, raw.call("ZCARD", timeouts(name)));
            if (i == 0) {
                assertEquals(1L, available(name), "PERMIT.AVAILABLE reclaims it");
            } else {
                assertEquals(1, semaphore(name).availablePermits(), "Redisson's availablePermits() reclaims it");
            }
            assertEquals("1", raw.call("GET", name));
            assertEquals(0L, raw.call("ZCARD", timeouts(name)));
            delete(name);
        }
    }

    // ---- reads and writes -------------------------------------------------------------------

    /**
     * What every version has: ids taken by Redisson read, updated and released by the module and
     * the other way round, leases, the never-expiring score, refusals, try-set and negative adds,
     * each side reading what the other wrote.
     */
    @Test
    void everySideReadsWhatTheOthersWrote() throws Exception {
        String name = "permit-shared";
        RPermitExpirableSemaphore semaphore = semaphore(name);
        assertEquals(0, semaphore.availablePermits(), "no semaphore: 0 (Redisson)");
        assertEquals(0L, available(name), "no semaphore: 0 (module)");
        assertNull(semaphore.tryAcquire(), "no semaphore: refused (Redisson)");
        assertNull(raw.call("PERMIT.ACQUIRE", name, "1", "-1"), "no semaphore: refused, nil (module)");

        assertTrue(semaphore.trySetPermits(4));
        assertEquals(0L, raw.call("PERMIT.TRYSETPERMITS", name, "9"), "a count exists: the module's try-set refused");
        assertEquals(4L, available(name));
        assertNull(raw.call("PERMIT.ADDPERMITS", name, "1"));
        assertFalse(semaphore.trySetPermits(9));
        assertEquals(5, semaphore.availablePermits(), "Redisson reads the module's add");

        // Redisson's ids, seen by the module.
        String leased = checkId(semaphore.tryAcquire(0, 10_000, TimeUnit.MILLISECONDS));
        String forever = checkId(semaphore.tryAcquire());
        long left = (Long) raw.call("PERMIT.LEASETIME", name, leased);
        assertTrue(left > 0 && left <= 10_000, "Redisson's lease, read by the module: " + left);
        assertEquals(-1L, raw.call("PERMIT.LEASETIME", name, forever), "Redisson's permit without lease never expires");
        assertTrue(scores(name).contains(NEVER), "its score is Redisson's never-expiring one: " + scores(name));
        assertEquals(1L, raw.call("PERMIT.UPDATELEASE", name, forever, "20000"), "the module gives it a lease");
        left = (Long) raw.call("PERMIT.LEASETIME", name, forever);
        assertTrue(left > 10_000 && left <= 20_000, "the module's new lease: " + left);
        assertEquals(1L, raw.call("PERMIT.UPDATELEASE", name, leased, "-1"), "and takes another's away");
        assertEquals(-1L, raw.call("PERMIT.LEASETIME", name, leased));
        assertEquals(3L, available(name));

        // The module's ids, seen by Redisson.
        List<String> module = moduleAcquire(raw, name, 3, 5_000);
        assertNotNull(module);
        assertEquals(3, module.size());
        assertEquals(0, semaphore.availablePermits());
        assertNull(semaphore.tryAcquire(), "none free: Redisson refused");
        Object refused = raw.call("PERMIT.ACQUIRE", name, "1", "1000");
        assertEquals(Long.valueOf(scores(name).get(0)), refused, "refused: the first expiry held");
        assertTrue(semaphore.updateLeaseTime(module.get(0), 30, TimeUnit.SECONDS), "Redisson updates the module's lease");
        left = (Long) raw.call("PERMIT.LEASETIME", name, module.get(0));
        assertTrue(left > 20_000 && left <= 30_000, "Redisson's new lease, read by the module: " + left);
        assertTrue(semaphore.updateLeaseTime(module.get(1), -1, TimeUnit.MILLISECONDS));
        assertEquals(-1L, raw.call("PERMIT.LEASETIME", name, module.get(1)), "Redisson's -1: never, read by the module");
        semaphore.release(module.get(0));
        assertTrue(semaphore.tryRelease(module.get(1)));
        assertFalse(semaphore.tryRelease(module.get(1)), "released already: Redisson's tryRelease false");
        assertEquals(0L, raw.call("PERMIT.TRYRELEASE", name, module.get(1)), "and the module's 0");
        assertEquals(0L, raw.call("PERMIT.RELEASE", name, module.get(2), module.get(1)),
                "all or none: one id not held, nothing released");
        assertEquals(1L, raw.call("PERMIT.RELEASE", name, module.get(2)));
        assertEquals(0L, raw.call("PERMIT.RELEASE", name, leased, module.get(2)), "all or none, again");
        assertEquals(3L, available(name));

        // Redisson's ids released by the module.
        assertEquals(2L, raw.call("PERMIT.RELEASE", name, leased, forever), "the module releases Redisson's ids");
        assertEquals(5, semaphore.availablePermits());
        assertEquals(0L, raw.call("ZCARD", timeouts(name)));
        String gone = leased;
        assertThrows(RuntimeException.class, () -> semaphore.release(gone),
                "Redisson's release of a permit the module released throws");

        // Negative adds, both ways.
        assertNull(raw.call("PERMIT.ADDPERMITS", name, "-8"));
        assertEquals(-3, semaphore.availablePermits(), "the module's negative add, read by Redisson");
        assertNull(semaphore.tryAcquire());
        semaphore.addPermits(10);
        assertEquals(7L, available(name));
        semaphore.addPermits(-9);
        assertEquals(-2L, available(name), "Redisson's negative add, read by the module");
        assertEquals("-2", raw.call("GET", name));
        assertEquals(-1L, raw.pttl(name), "no TTL from any of these");
        delete(name);
    }

    /**
     * {@code getPermits}, {@code acquiredPermits} and {@code setPermits} (3.19.1+) against
     * {@code PERMIT.PERMITS}, {@code ACQUIRED} and {@code SETPERMITS}.
     */
    @Test
    void theCountsAgree() throws Exception {
        Method getPermits = Env.requireMethod(Env.PERMIT_COUNTS_SINCE, "RPermitExpirableSemaphore.getPermits,"
                + " acquiredPermits, setPermits", RPermitExpirableSemaphore.class, "getPermits");
        Method acquiredPermits = Env.methodSince(Env.PERMIT_COUNTS_SINCE, RPermitExpirableSemaphore.class,
                "acquiredPermits");
        Method setPermits = redissonSetPermits();
        String name = "permit-counts";
        RPermitExpirableSemaphore semaphore = semaphore(name);
        setPermits.invoke(semaphore, 5);
        assertEquals(5L, raw.call("PERMIT.PERMITS", name));
        String id = checkId(semaphore.tryAcquire(0, 10_000, TimeUnit.MILLISECONDS));
        List<String> module = moduleAcquire(raw, name, 2, -1);
        assertNotNull(module);
        assertEquals(3L, raw.call("PERMIT.ACQUIRED", name));
        assertEquals(3, acquiredPermits.invoke(semaphore));
        assertEquals(5, getPermits.invoke(semaphore));
        assertNull(raw.call("PERMIT.SETPERMITS", name, "7"));
        assertEquals(7, getPermits.invoke(semaphore), "the module's setPermits, read by Redisson");
        assertEquals(4, semaphore.availablePermits());
        setPermits.invoke(semaphore, 2);
        assertEquals(2L, raw.call("PERMIT.PERMITS", name), "Redisson's setPermits, read by the module");
        assertEquals(-1L, available(name), "fewer than taken: the free count goes negative");
        assertEquals(3L, raw.call("PERMIT.ACQUIRED", name));
        semaphore.release(id);
        assertEquals(2L, raw.call("PERMIT.RELEASE", name, module.get(0), module.get(1)));
        assertEquals(2, semaphore.availablePermits());
        assertEquals(0, acquiredPermits.invoke(semaphore));
        delete(name);
    }

    /**
     * The methods of n permits (3.23.4+): Redisson's ids released all at once by the module, the
     * module's by Redisson's {@code release(ids)}.
     */
    @Test
    @SuppressWarnings("unchecked")
    void manyPermitsAtOnceFromBothSides() throws Exception {
        Method tryAcquireMany = Env.requireMethod(Env.PERMIT_MANY_SINCE, "RPermitExpirableSemaphore's methods of n"
                + " permits", RPermitExpirableSemaphore.class, "tryAcquire", int.class, long.class, long.class,
                TimeUnit.class);
        Method releaseMany = Env.methodSince(Env.PERMIT_MANY_SINCE, RPermitExpirableSemaphore.class, "release",
                List.class);
        String name = "permit-many";
        RPermitExpirableSemaphore semaphore = semaphore(name);
        assertEquals(1L, raw.call("PERMIT.TRYSETPERMITS", name, "5"));
        List<String> theirs = (List<String>) tryAcquireMany.invoke(semaphore, 3, 0L, 10_000L, TimeUnit.MILLISECONDS);
        assertEquals(3, theirs.size());
        theirs.forEach(PermitExpirableSemaphoreTest::checkId);
        assertEquals(2L, available(name));
        assertNull(ids(raw.call("PERMIT.ACQUIRE", name, "3", "1000")), "3 asked, 2 free: refused");
        List<String> ours = moduleAcquire(raw, name, 2, 10_000);
        assertNotNull(ours);
        releaseMany.invoke(semaphore, ours);
        assertEquals(2L, available(name), "Redisson releases the module's ids");
        List<String> args = new ArrayList<>(List.of(name));
        args.addAll(theirs);
        assertEquals(3L, raw.call("PERMIT.RELEASE", args.toArray(new String[0])), "the module releases Redisson's");
        assertEquals(5, semaphore.availablePermits());
        delete(name);
    }

    /** {@code getLeaseTime} (3.41.0+): Redisson reads the module's leases, -1 for a permit that never expires. */
    @Test
    void redissonReadsTheModulesLeases() throws Exception {
        Method getLeaseTime = Env.requireMethod(Env.PERMIT_LEASE_TIME_SINCE, "RPermitExpirableSemaphore.getLeaseTime",
                RPermitExpirableSemaphore.class, "getLeaseTime", String.class);
        String name = "permit-lease-time";
        RPermitExpirableSemaphore semaphore = semaphore(name);
        assertEquals(1L, raw.call("PERMIT.TRYSETPERMITS", name, "2"));
        String leased = moduleAcquireOne(name, 10_000);
        String forever = moduleAcquireOne(name, -1);
        long left = (Long) getLeaseTime.invoke(semaphore, leased);
        assertTrue(left > 0 && left <= 10_000, "the module's lease, read by Redisson: " + left);
        assertEquals(-1L, getLeaseTime.invoke(semaphore, forever), "the module's never-expiring permit");
        assertEquals(List.of(NEVER), scores(name).subList(1, 2), "with Redisson's score for it");
        assertEquals(1L, raw.call("PERMIT.UPDATELEASE", name, forever, "20000"));
        left = (Long) getLeaseTime.invoke(semaphore, forever);
        assertTrue(left > 10_000 && left <= 20_000, "the module's new lease, read by Redisson: " + left);
        assertEquals(2L, raw.call("PERMIT.RELEASE", name, leased, forever));
        delete(name);
    }
}
