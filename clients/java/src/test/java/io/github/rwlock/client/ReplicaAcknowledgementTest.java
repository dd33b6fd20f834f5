package io.github.rwlock.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.io.IOException;
import java.io.InputStream;
import java.io.OutputStream;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.net.Socket;
import java.time.Duration;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.Test;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.JedisPooled;
import redis.clients.jedis.exceptions.JedisDataException;

/**
 * The replica acknowledgement's contract: what the client learns of a master (the replicas only
 * ever rise), what each acquisition pipelines after it, and on real servers: a master that lost
 * the replica it was seen with fails acquisitions (the paused-master failover in miniature), a
 * master refusing writes without replicas too, and an uncontended cycle is two round trips.
 */
class ReplicaAcknowledgementTest {
    private static final String MASTER = "127.0.0.1:6379";

    private static String info(int replicas, boolean aof) {
        return "# Replication\r\nrole:master\r\nconnected_slaves:" + replicas + "\r\n# Persistence\r\naof_enabled:"
                + (aof ? 1 : 0) + "\r\n";
    }

    @Test
    void theFirstAcquisitionAsksInfoThenItRidesInThePipelineEveryFiveSeconds() {
        Masters masters = new Masters();
        long now = System.nanoTime();
        assertNull(masters.plan(MASTER, ReplicaSync.DEFAULT, now), "INFO first");
        masters.learn(MASTER, info(2, false), now);
        Masters.Checks checks = masters.plan(MASTER, ReplicaSync.DEFAULT, now);
        assertEquals(List.of(List.of("WAIT", "2", "1000")), checks.commands());
        assertEquals(1000, checks.extraMs());
        long later = now + Masters.REFRESH_NANOS;
        assertEquals(List.of(List.of("WAIT", "2", "1000"), Masters.INFO),
                masters.plan(MASTER, ReplicaSync.DEFAULT, later).commands());
        assertEquals(List.of(List.of("WAIT", "2", "1000")),
                masters.plan(MASTER, ReplicaSync.DEFAULT, later).commands(), "asked already");
    }

    @Test
    void infoOnlyRaisesWhatIsExpected() {
        Masters masters = new Masters();
        long now = System.nanoTime();
        masters.learn(MASTER, info(1, false), now);
        masters.learn(MASTER, info(2, false), now);
        masters.learn(MASTER, info(0, false), now); // a paused or demoted master says 0
        assertEquals(2, masters.expected(MASTER));
        Masters.Checks refresh = masters.plan(MASTER, ReplicaSync.DEFAULT, now + Masters.REFRESH_NANOS);
        assertNull(masters.read(refresh, List.of(2L, info(0, true)), MASTER));
        assertEquals(2, masters.expected(MASTER), "through the pipeline's INFO too");
        assertEquals(List.of(List.of("WAIT", "2", "1000"), List.of("WAITAOF", "1", "0", "1000")),
                masters.plan(MASTER, ReplicaSync.DEFAULT, now).commands(), "the AOF as it last said");
        assertNull(masters.plan("127.0.0.1:6380", ReplicaSync.DEFAULT, now), "each master apart");
    }

    @Test
    void anExplicitCountWinsAndNeedsNoInfo() {
        Masters masters = new Masters();
        long now = System.nanoTime();
        masters.learn(MASTER, info(3, false), now);
        assertEquals(List.of(List.of("WAIT", "1", "1000")),
                masters.plan(MASTER, ReplicaSync.DEFAULT.withReplicas(1), now).commands());
        ReplicaSync none = ReplicaSync.DEFAULT.withReplicas(0).withAof(ReplicaSync.Aof.OFF);
        Masters fresh = new Masters();
        assertEquals(List.of(), fresh.plan(MASTER, none, now + Masters.REFRESH_NANOS).commands(), "no INFO ever");
        assertEquals(List.of(), fresh.plan(MASTER, ReplicaSync.DISABLED, now).commands());
        assertThrows(IllegalArgumentException.class, () -> ReplicaSync.DEFAULT.withReplicas(-2));
    }

    @Test
    void theAofAutoRequiredOrOff() {
        Masters masters = new Masters();
        long now = System.nanoTime();
        masters.learn(MASTER, info(0, true), now);
        List<String> waitAof = List.of("WAITAOF", "1", "0", "1000");
        assertEquals(List.of(waitAof), masters.plan(MASTER, ReplicaSync.DEFAULT, now).commands());
        assertEquals(List.of(), masters.plan(MASTER, ReplicaSync.DEFAULT.withAof(ReplicaSync.Aof.OFF), now).commands());
        ReplicaSync required = ReplicaSync.DEFAULT.withReplicas(0).withAof(ReplicaSync.Aof.REQUIRED);
        Masters fresh = new Masters();
        Masters.Checks checks = fresh.plan(MASTER, required, now);
        assertEquals(List.of(waitAof), checks.commands(), "required: also where no AOF was seen");
        JedisDataException off = new JedisDataException(
                "ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.");
        assertTrue(fresh.read(checks, List.of(off), MASTER).startsWith("WAITAOF"));
        assertTrue(fresh.read(checks, List.of(List.of(0L, 0L)), MASTER).startsWith("WAITAOF"));
        assertNull(fresh.read(checks, List.of(List.of(1L, 0L)), MASTER));

        // A master without WAITAOF (before 7.2): AUTO does without it from then on, REQUIRED fails.
        JedisDataException unknown = new JedisDataException("ERR unknown command 'WAITAOF', with args beginning with:");
        Masters.Checks auto = masters.plan(MASTER, ReplicaSync.DEFAULT, now);
        assertNull(masters.read(auto, List.of(unknown), MASTER));
        assertEquals(List.of(), masters.plan(MASTER, ReplicaSync.DEFAULT, now).commands());
        Masters.Checks nothing = masters.plan(MASTER, ReplicaSync.DEFAULT.withAof(ReplicaSync.Aof.REQUIRED), now);
        assertEquals(List.of(), nothing.commands());
        assertTrue(masters.read(nothing, List.of(), MASTER).contains("no WAITAOF"));
    }

    @Test
    void theRepliesDecide() {
        Masters masters = new Masters();
        long now = System.nanoTime();
        masters.learn(MASTER, info(1, false), now);
        Masters.Checks checks = masters.plan(MASTER, ReplicaSync.DEFAULT, now);
        assertNull(masters.read(checks, List.of(1L), MASTER));
        assertEquals("WAIT 1 replied 0", masters.read(checks, List.of(0L), MASTER));
    }

    /**
     * The client learned the master had a replica; the replica goes ({@code REPLICAOF NO ONE}: the
     * master now says {@code connected_slaves:0}, as a paused master does until it is demoted), and
     * the next acquisition fails and is released instead of being acknowledged by nobody. With an
     * explicit count of 0 it succeeds.
     */
    @Test
    void aMasterThatLostItsReplicaFailsAcquisitions() throws Exception {
        try (RedisServer master = new RedisServer("--repl-diskless-sync-delay", "0");
                RedisServer replica = new RedisServer("--replicaof", "127.0.0.1", Integer.toString(master.port));
                JedisPooled jedis = master.pooled();
                Client client = Client.builder(jedis)
                        .replicaSync(ReplicaSync.DEFAULT.withReplicas(ReplicaSync.AUTO)).build()) {
            RedisServer.waitUntil("the replica", 30_000, () -> "1".equals(master.info("replication", "connected_slaves"))
                    && "up".equals(replica.info("replication", "master_link_status")) && master.acknowledged());
            PlainLock lock = new PlainLock(client, "a:lock");
            assertTrue(lock.tryLock());
            assertEquals(1L, replica.call("EXISTS", "a:lock"), "on the replica");
            lock.unlock();

            replica.call("REPLICAOF", "NO", "ONE");
            RedisServer.waitUntil("the master saw it go", 30_000,
                    () -> "0".equals(master.info("replication", "connected_slaves")));
            NotSyncedException e = assertThrows(NotSyncedException.class, lock::tryLock);
            assertTrue(e.getMessage().contains("WAIT 1 replied 0"), e.getMessage());
            assertEquals(0L, master.call("EXISTS", "a:lock"), "released again");
            assertFalse(lock.isHeldByCurrentThread());
            DistributedReadWriteLock rw = new DistributedReadWriteLock(client, "a:rw");
            assertThrows(NotSyncedException.class, () -> rw.writeLock().tryLock());
            assertEquals(0L, master.call("EXISTS", "a:rw"));
            DistributedSemaphore semaphore = new DistributedSemaphore(client, "a:sem");
            assertTrue(semaphore.trySetPermits(2));
            e = assertThrows(NotSyncedException.class, () -> semaphore.tryAcquire(2));
            assertTrue(e.getMessage().contains("WAIT 1 replied 0"), e.getMessage());
            assertEquals(2, semaphore.availablePermits(), "the permits given back again");
            DistributedPermitExpirableSemaphore permits = new DistributedPermitExpirableSemaphore(client, "a:permit");
            assertTrue(permits.trySetPermits(2));
            e = assertThrows(NotSyncedException.class, () -> permits.tryAcquire(2, 0, -1, TimeUnit.MILLISECONDS));
            assertTrue(e.getMessage().contains("WAIT 1 replied 0"), e.getMessage());
            assertEquals(0, permits.acquiredPermits(), "the ids released again");
            assertEquals(2, permits.availablePermits());

            try (Client alone = Client.builder(jedis).replicaSync(ReplicaSync.DEFAULT.withReplicas(0)).build()) {
                PlainLock quick = new PlainLock(alone, "a:lock");
                assertTrue(quick.tryLock(), "no replica expected");
                quick.unlock();
            }
        }
    }

    /** {@code min-replicas-to-write 1} without a replica: refused by the server, nothing written. */
    @Test
    void aMasterRefusingWritesWithoutReplicasFailsAcquisitions() {
        try (RedisServer master = new RedisServer("--min-replicas-to-write", "1");
                JedisPooled jedis = master.pooled();
                Client client = Client.create(jedis)) {
            NotSyncedException e = assertThrows(NotSyncedException.class, () -> new PlainLock(client, "m:lock").tryLock());
            assertTrue(e.getMessage().contains("NOREPLICAS"), e.getMessage());
            assertThrows(NotSyncedException.class, () -> new FairLock(client, "m:fair").tryLock());
            assertThrows(NotSyncedException.class, () -> new DistributedSemaphore(client, "m:sem").tryAcquire());
            assertThrows(NotSyncedException.class, () -> new DistributedPermitExpirableSemaphore(client, "m:permit").tryAcquire());
            assertEquals(0L, master.call("DBSIZE"), "nothing written");
        }
    }

    /**
     * Round trips counted by a proxy: after the first acquisition (which asks the master's INFO
     * once), an uncontended tryLock-unlock cycle is two, of one command each (the acquisition, the
     * release: no latch, no DEL); the server ran no INFO and no WAIT in them.
     */
    @Test
    void anUncontendedCycleIsTwoRoundTrips() throws Exception {
        try (RedisServer server = new RedisServer();
                TurnProxy proxy = new TurnProxy(server.hostAndPort());
                JedisPooled jedis = new JedisPooled(proxy.hostAndPort().getHost(), proxy.hostAndPort().getPort());
                Client client = Client.create(jedis)) {
            PlainLock lock = new PlainLock(client, "c:lock");
            assertTrue(lock.tryLock(0, 10_000, java.util.concurrent.TimeUnit.MILLISECONDS));
            lock.unlock();
            server.call("CONFIG", "RESETSTAT");
            long before = proxy.turns();
            for (int i = 0; i < 3; i++) {
                assertTrue(lock.tryLock(0, 10_000, java.util.concurrent.TimeUnit.MILLISECONDS));
                lock.unlock();
            }
            assertEquals(6, proxy.turns() - before, "two round trips per cycle");
            // One read of the counts (each read is an INFO, counted in the next).
            String stats = (String) server.call("INFO", "commandstats");
            assertEquals(0, RedisServer.calls("info", stats), "no INFO in the cycles");
            assertEquals(3, RedisServer.calls("lock.acquire", stats));
            assertEquals(3, RedisServer.calls("lock.unlock", stats));
            assertEquals(6, allCalls(stats), "two commands per cycle, nothing else: " + stats);
            assertEquals(0L, server.call("DBSIZE"), "no latch written");
        }
    }

    /**
     * Every command's calls in an {@code INFO commandstats} reply, added up, but the test's own
     * {@code CONFIG RESETSTAT} (counted once it ran, as {@code cmdstat_config|resetstat} since
     * Redis 7, {@code cmdstat_config} before).
     */
    private static long allCalls(String stats) {
        long calls = 0;
        for (String line : stats.split("\r\n")) {
            int at = line.indexOf(":calls=");
            if (line.startsWith("cmdstat_") && !line.startsWith("cmdstat_config") && at > 0) {
                calls += Long.parseLong(line.substring(at + ":calls=".length(), line.indexOf(',', at)));
            }
        }
        return calls;
    }

    /**
     * A TCP proxy counting round trips: one begins each time the client sends after the server
     * last spoke (or first), however many commands (a pipeline) and reads that send takes.
     */
    static final class TurnProxy implements AutoCloseable {
        private final HostAndPort target;
        private final ServerSocket listener;
        private final AtomicLong turns = new AtomicLong();

        TurnProxy(HostAndPort target) throws IOException {
            this.target = target;
            this.listener = new ServerSocket(0, 50, InetAddress.getLoopbackAddress());
            Thread accept = new Thread(this::accept, "turn-proxy-accept");
            accept.setDaemon(true);
            accept.start();
        }

        HostAndPort hostAndPort() {
            return new HostAndPort("127.0.0.1", listener.getLocalPort());
        }

        long turns() {
            return turns.get();
        }

        private void accept() {
            while (!listener.isClosed()) {
                try {
                    Socket client = listener.accept();
                    Socket server = new Socket(target.getHost(), target.getPort());
                    AtomicBoolean answered = new AtomicBoolean(true);
                    pump(client, server, () -> {
                        if (answered.getAndSet(false)) {
                            turns.incrementAndGet();
                        }
                    });
                    pump(server, client, () -> answered.set(true));
                } catch (IOException e) {
                    return; // closed
                }
            }
        }

        private static void pump(Socket from, Socket to, Runnable onData) {
            Thread thread = new Thread(() -> {
                byte[] buf = new byte[65536];
                try (InputStream in = from.getInputStream(); OutputStream out = to.getOutputStream()) {
                    int n;
                    while ((n = in.read(buf)) > 0) {
                        onData.run(); // before passing it on: the other side answers after
                        out.write(buf, 0, n);
                        out.flush();
                    }
                } catch (IOException e) {
                    // one side closed
                } finally {
                    try {
                        from.close();
                        to.close();
                    } catch (IOException e) {
                        // closing anyway
                    }
                }
            }, "turn-proxy-pump");
            thread.setDaemon(true);
            thread.start();
        }

        @Override
        public void close() throws IOException {
            listener.close();
        }
    }
}
