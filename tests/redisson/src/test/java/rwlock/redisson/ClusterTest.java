package rwlock.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.Arrays;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.redisson.Redisson;
import org.redisson.api.RCountDownLatch;
import org.redisson.api.RLock;
import org.redisson.api.RReadWriteLock;
import org.redisson.api.RSemaphore;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * Redisson in cluster mode against three masters with the module. Redisson
 * 3.22+ subscribes to a lock's channel with SSUBSCRIBE in a Redis 7 cluster,
 * older versions with SUBSCRIBE; the module's rwlock.publish must match:
 * {@code auto} (SPUBLISH in cluster mode) for 3.22+, {@code publish} before.
 * The test runs with the matching setting, and shows what a mismatch does.
 */
class ClusterTest {
    private static final long LEASE = 10_000;
    private static final int HANDOFFS = 10;

    private static final List<Servers.Server> nodes = new ArrayList<>();
    private static final List<Raw> raws = new ArrayList<>();
    private static RedissonClient redisson;
    /** The rwlock.publish this Redisson version needs, and the one it does not. */
    private static String matching;
    private static String mismatching;

    @BeforeAll
    static void start() throws Exception {
        for (int i = 0; i < 3; i++) {
            Servers.Server node = Servers.start(true);
            nodes.add(node);
            raws.add(new Raw(node.port));
        }
        int[][] ranges = {{0, 5460}, {5461, 10922}, {10923, 16383}};
        for (int i = 0; i < 3; i++) {
            assertEquals("OK", raws.get(i).call("CLUSTER", "ADDSLOTSRANGE",
                    String.valueOf(ranges[i][0]), String.valueOf(ranges[i][1])));
        }
        for (int i = 1; i < 3; i++) {
            assertEquals("OK", raws.get(0).call("CLUSTER", "MEET", "127.0.0.1", String.valueOf(nodes.get(i).port)));
        }
        Env.await("cluster_state:ok on every node, three masters known", 20_000, () -> {
            for (Raw raw : raws) {
                String info = (String) raw.call("CLUSTER", "INFO");
                if (!info.contains("cluster_state:ok") || !info.contains("cluster_known_nodes:3")) {
                    return false;
                }
            }
            return true;
        });
        boolean sharded = Env.atLeast(Env.SHARDED_SINCE);
        matching = sharded ? "auto" : "publish";
        mismatching = sharded ? "publish" : "auto";
        setPublish(matching);
        Env.record("cluster publish", "Redisson " + Env.VERSION + " subscribes with "
                + (sharded ? "SSUBSCRIBE (sharded)" : "SUBSCRIBE (classic)") + ": rwlock.publish " + matching);

        Config config = new Config();
        config.setLockWatchdogTimeout(1_000);
        var cluster = config.useClusterServers();
        for (Servers.Server node : nodes) {
            cluster.addNodeAddress(node.address());
        }
        redisson = Redisson.create(config);
    }

    @AfterAll
    static void stop() {
        if (redisson != null) {
            redisson.shutdown();
        }
        raws.forEach(Raw::close);
        nodes.forEach(Servers.Server::close);
    }

    private static void setPublish(String mode) {
        for (Raw raw : raws) {
            assertEquals("OK", raw.call("CONFIG", "SET", "rwlock.publish", mode));
        }
    }

    /** The connection to the master that owns {@code name}'s slot. */
    private static Raw nodeFor(String name) {
        long slot = (Long) raws.get(0).call("CLUSTER", "KEYSLOT", name);
        return raws.get(slot <= 5460 ? 0 : slot <= 10922 ? 1 : 2);
    }

    /** A fresh connection to the master that owns {@code name}'s slot. */
    private static Raw connectionFor(String name) {
        return new Raw(nodes.get(raws.indexOf(nodeFor(name))).port);
    }

    /** Subscribers of a channel on its node, classic or sharded. */
    private static long listeners(String channel) {
        Raw raw = nodeFor(channel);
        long classic = (Long) ((List<?>) raw.call("PUBSUB", "NUMSUB", channel)).get(1);
        long sharded = (Long) ((List<?>) raw.call("PUBSUB", "SHARDNUMSUB", channel)).get(1);
        return classic + sharded;
    }

    /** Names spread over the three masters. */
    private static List<String> namesOnEveryNode(String prefix) {
        List<String> out = new ArrayList<>();
        boolean[] seen = new boolean[3];
        for (int i = 0; out.size() < 3; i++) {
            String name = prefix + "-" + i;
            int node = raws.indexOf(nodeFor(name));
            if (!seen[node]) {
                seen[node] = true;
                out.add(name);
            }
        }
        return out;
    }

    /** Times one module -> Redisson handoff: Redisson's lock() waits on its channel. */
    private static double moduleToRedisson(String name, String owner, Env.JavaThread waiter) throws Exception {
        Raw raw = nodeFor(name);
        RLock lock = redisson.getLock(name);
        assertNull(raw.call("LOCK.ACQUIRE", name, owner, String.valueOf(LEASE)));
        assertFalse(lock.tryLock(0, LEASE, TimeUnit.MILLISECONDS), "a module hold refuses Redisson");
        Future<Long> got = waiter.submit(() -> {
            lock.lock(LEASE, TimeUnit.MILLISECONDS);
            return System.nanoTime();
        });
        String channel = Env.derived("redisson_lock__channel", name);
        Env.await("Redisson waiting on " + channel, 5_000, () -> listeners(channel) > 0);
        Thread.sleep(2);
        long t0 = System.nanoTime();
        assertEquals(1L, raw.call("LOCK.UNLOCK", name, owner));
        double ms = (got.get(LEASE + 5_000, TimeUnit.MILLISECONDS) - t0) / 1e6;
        waiter.run(() -> {
            lock.unlock();
            return null;
        });
        return ms;
    }

    @Test
    void handoffBothWaysOnEveryMaster() throws Exception {
        List<Double> m2r = new ArrayList<>();
        List<Double> r2m = new ArrayList<>();
        String owner = Env.moduleOwner(redisson);
        try (Env.JavaThread java = new Env.JavaThread(); Env.JavaThread moduleThread = new Env.JavaThread()) {
            for (int round = 0; round < HANDOFFS; round++) {
                for (String name : namesOnEveryNode("cl-" + round)) {
                    m2r.add(moduleToRedisson(name, owner, java));

                    RLock lock = redisson.getLock(name);
                    java.run(() -> {
                        lock.lock(LEASE, TimeUnit.MILLISECONDS);
                        return null;
                    });
                    Raw raw = nodeFor(name);
                    assertInstanceOf(Long.class, raw.call("LOCK.ACQUIRE", name, owner, "5000"), "Redisson's hold refuses the module");
                    try (Raw waiterConn = connectionFor(name)) {
                        Future<Object[]> got = moduleThread.submit(() -> {
                            Object reply = waiterConn.callBlocking("LOCK.ACQUIRE", name, owner, String.valueOf(LEASE), "BLOCK", "5000");
                            return new Object[] {reply, System.nanoTime()};
                        });
                        Env.await("module waiter blocked", 5_000, () -> Env.blockedClients(raw) > 0);
                        long t0 = java.run(() -> {
                            long t = System.nanoTime();
                            lock.unlock();
                            return t;
                        });
                        Object[] reply = got.get(6, TimeUnit.SECONDS);
                        assertNull(reply[0]);
                        r2m.add(((Long) reply[1] - t0) / 1e6);
                    }
                    assertEquals(1L, raw.call("LOCK.UNLOCK", name, owner));
                }
            }
        }
        Env.record("cluster handoff module->Redisson (RLock)", Env.summary(m2r));
        Env.record("cluster handoff Redisson->module (RLock)", Env.summary(r2m));
        assertTrue(Env.percentile(m2r, 99) < Env.HANDOFF_MS, "Redisson woken by the module's " + matching + ": " + Env.summary(m2r));
        assertTrue(Env.percentile(r2m, 99) < Env.HANDOFF_MS, Env.summary(r2m));
    }

    @Test
    void aRedissonWriterWakesOnTheModulesReadUnlock() throws Exception {
        String owner = Env.moduleOwner(redisson);
        try (Env.JavaThread java = new Env.JavaThread()) {
            for (String name : namesOnEveryNode("clrw")) {
                Raw raw = nodeFor(name);
                RReadWriteLock rw = redisson.getReadWriteLock(name);
                assertNull(raw.call("RWLOCK.READ", name, owner, String.valueOf(LEASE)));
                Future<Long> got = java.submit(() -> {
                    rw.writeLock().lock(LEASE, TimeUnit.MILLISECONDS);
                    return System.nanoTime();
                });
                String channel = Env.derived("redisson_rwlock", name);
                Env.await("Redisson writer waiting", 5_000, () -> listeners(channel) > 0);
                long t0 = System.nanoTime();
                assertEquals(1L, raw.call("RWLOCK.UNLOCK", name, owner, "READ"));
                double ms = (got.get(LEASE + 5_000, TimeUnit.MILLISECONDS) - t0) / 1e6;
                assertTrue(ms < Env.HANDOFF_MS, "writer woke " + ms + " ms after the module's read unlock");
                java.run(() -> {
                    rw.writeLock().unlock();
                    return null;
                });
            }
        }
    }

    /**
     * The kind of subscription Redisson listens on {@code channel} with, on the channel's master:
     * SSUBSCRIBE from 3.22 on (CHANGELOG 3.22.0: RLock, RSemaphore, RCountDownLatch and
     * RPermitExpirableSemaphore on sharded pub/sub in a Redis 7 cluster), SUBSCRIBE before.
     */
    private static void assertSubscriptionKind(String channel) {
        Raw raw = nodeFor(channel);
        long classic = (Long) ((List<?>) raw.call("PUBSUB", "NUMSUB", channel)).get(1);
        long sharded = (Long) ((List<?>) raw.call("PUBSUB", "SHARDNUMSUB", channel)).get(1);
        boolean expectSharded = Env.atLeast(Env.SHARDED_SINCE);
        assertTrue(expectSharded ? sharded > 0 && classic == 0 : classic > 0 && sharded == 0,
                "Redisson " + Env.VERSION + " on " + channel + ": " + classic + " SUBSCRIBE, " + sharded
                        + " SSUBSCRIBE; expected " + (expectSharded ? "SSUBSCRIBE" : "SUBSCRIBE"));
    }

    /**
     * A module client on {@code name}'s master parked in {@code command} (a BLOCK), then served by
     * Redisson's {@code give}: the ms from {@code give} to the reply, which must be 1.
     */
    private static double moduleWaiterServed(String name, Env.JavaThread moduleThread, Callable<?> give,
            String... command) throws Exception {
        try (Raw waiterConn = connectionFor(name)) {
            Future<Object[]> parked = moduleThread.submit(() -> {
                Object reply = waiterConn.callBlocking(command[0], Arrays.copyOfRange(command, 1, command.length));
                return new Object[] {reply, System.nanoTime()};
            });
            Env.await("module waiter blocked in " + command[0], 5_000, () -> Env.blockedClients(nodeFor(name)) > 0);
            long t0 = System.nanoTime();
            give.call();
            Object[] reply = parked.get(LEASE, TimeUnit.MILLISECONDS);
            assertEquals(1L, reply[0], command[0] + " served");
            return ((Long) reply[1] - t0) / 1e6;
        }
    }

    /**
     * RSemaphore and RCountDownLatch in cluster mode, on a name of each master: Redisson's waiter
     * (in {@code acquire()}, in {@code await()}) listens with the kind of subscription its version
     * uses, and the module's {@code SEMAPHORE.RELEASE} and last {@code LATCH.COUNTDOWN}, published
     * as {@code rwlock.publish} says, wake it; Redisson's {@code release()} and last
     * {@code countDown()} wake a module BLOCK waiter (through keyspace events, whatever the
     * publish kind).
     */
    @Test
    void semaphoreAndLatchHandoffsOnEveryMaster() throws Exception {
        List<Double> m2r = new ArrayList<>();
        List<Double> r2m = new ArrayList<>();
        try (Env.JavaThread java = new Env.JavaThread(); Env.JavaThread moduleThread = new Env.JavaThread()) {
            for (String name : namesOnEveryNode("clsem")) {
                Raw raw = nodeFor(name);
                RSemaphore semaphore = redisson.getSemaphore(name);
                assertEquals(1L, raw.call("SEMAPHORE.TRYSETPERMITS", name, "0"));
                Future<Long> got = java.submit(() -> {
                    semaphore.acquire();
                    return System.nanoTime();
                });
                String channel = Env.derived("redisson_sc", name);
                Env.await("Redisson's acquire() listening on " + channel, 5_000, () -> listeners(channel) > 0);
                assertSubscriptionKind(channel);
                long t0 = System.nanoTime();
                assertNull(raw.call("SEMAPHORE.RELEASE", name, "1"));
                m2r.add((got.get(LEASE, TimeUnit.MILLISECONDS) - t0) / 1e6);
                assertEquals(0L, raw.call("SEMAPHORE.AVAILABLE", name));
                r2m.add(moduleWaiterServed(name, moduleThread, () -> {
                    semaphore.release();
                    return null;
                }, "SEMAPHORE.ACQUIRE", name, "1", "BLOCK", String.valueOf(LEASE)));
                raw.call("DEL", name);
            }
            for (String name : namesOnEveryNode("cllatch")) {
                Raw raw = nodeFor(name);
                RCountDownLatch latch = redisson.getCountDownLatch(name);
                assertTrue(latch.trySetCount(1));
                Future<Long> opened = java.submit(() -> {
                    latch.await();
                    return System.nanoTime();
                });
                String channel = "redisson_countdownlatch__channel__{" + name + "}";
                Env.await("Redisson's await() listening on " + channel, 5_000, () -> listeners(channel) > 0);
                assertSubscriptionKind(channel);
                long t0 = System.nanoTime();
                assertNull(raw.call("LATCH.COUNTDOWN", name));
                m2r.add((opened.get(LEASE, TimeUnit.MILLISECONDS) - t0) / 1e6);
                assertEquals(1L, raw.call("LATCH.TRYSETCOUNT", name, "1"));
                r2m.add(moduleWaiterServed(name, moduleThread, () -> {
                    latch.countDown();
                    return null;
                }, "LATCH.AWAIT", name, "BLOCK", String.valueOf(LEASE)));
                assertEquals(0L, raw.call("EXISTS", name));
            }
        }
        Env.record("cluster semaphore+latch module->Redisson (rwlock.publish " + matching + ")", Env.summary(m2r));
        Env.record("cluster semaphore+latch Redisson->module", Env.summary(r2m));
        assertTrue(Collections.max(m2r) < Env.HANDOFF_MS, "Redisson woken by the module's " + matching + ": "
                + Env.summary(m2r));
        assertTrue(Collections.max(r2m) < Env.HANDOFF_MS, Env.summary(r2m));
    }

    /**
     * With the other publish kind the message goes where Redisson does not
     * listen: its waiter wakes only when the TTL it was told has passed.
     */
    @Test
    void aMismatchedPublishLeavesRedissonWaitingForTheTtl() throws Exception {
        String owner = Env.moduleOwner(redisson);
        String name = "cl-mismatch";
        Raw raw = nodeFor(name);
        // The hold must outlast Redisson's first try, its subscription and its second try, or
        // Redisson simply takes the expired lock and never waits; a cold Redisson on a loaded
        // machine has taken more than 1.5 s for that. The test lasts about this lease.
        long hold = 5_000;
        setPublish(mismatching);
        try (Env.JavaThread java = new Env.JavaThread()) {
            RLock lock = redisson.getLock(name);
            assertNull(raw.call("LOCK.ACQUIRE", name, owner, String.valueOf(hold)));
            raw.call("CONFIG", "RESETSTAT");
            Future<Long> got = java.submit(() -> {
                lock.lock(LEASE, TimeUnit.MILLISECONDS);
                return System.nanoTime();
            });
            String channel = Env.derived("redisson_lock__channel", name);
            // lock() runs its script, subscribes, runs it again and only then sleeps the TTL that
            // second run replied: release after the second run, or Redisson could simply take
            // the free lock (no sleep, no message needed).
            Env.await("Redisson waiting on " + channel + " after its second try", hold,
                    () -> got.isDone() || (listeners(channel) > 0 && Env.scriptCalls(raw) >= 2));
            assertFalse(got.isDone(), "the " + hold + " ms hold ran out before Redisson waited on it");
            long read = System.nanoTime();
            long pttl = raw.pttl(name);
            long t0 = System.nanoTime();
            assertEquals(1L, raw.call("LOCK.UNLOCK", name, owner));
            // The hold's deadline as seen from t0: its PTTL was read before t0, so the real deadline
            // is no earlier than this.
            double deadline = pttl - (t0 - read) / 1e6;
            assertTrue(deadline > 1_000, "Redisson waited too late to tell a message from the TTL: "
                    + deadline + " ms of the hold left");
            double ms = (got.get(LEASE + 5_000, TimeUnit.MILLISECONDS) - t0) / 1e6;
            java.run(() -> {
                lock.unlock();
                return null;
            });
            Env.record("cluster mismatch", String.format(Locale.ROOT,
                    "rwlock.publish %s: Redisson's waiter took the lock %.0f ms after the module's unlock,"
                            + " the hold's deadline %.0f ms after it (with %s: milliseconds)",
                    mismatching, ms, deadline, matching));
            // Redisson sleeps the TTL its second try was told, so it cannot wake before the
            // hold's deadline unless a message woke it; the 20 ms are the clocks' granularity
            // (Redis's milliseconds, Java's nanoseconds). A load only makes it later.
            assertTrue(ms > deadline - 20, "with rwlock.publish " + mismatching + " Redisson " + Env.VERSION
                    + " should not hear the release, yet woke after " + ms + " ms, the hold's deadline "
                    + deadline + " ms");
        } finally {
            setPublish(matching);
        }
    }
}
