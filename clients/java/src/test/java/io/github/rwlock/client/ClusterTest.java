package io.github.rwlock.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.junit.jupiter.api.TestInstance;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.JedisCluster;
import redis.clients.jedis.providers.ClusterConnectionProvider;
import redis.clients.jedis.exceptions.JedisMovedDataException;
import redis.clients.jedis.util.JedisClusterCRC16;

/** A 3-master cluster with the module: every command at its slot's master, MOVED followed. */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ClusterTest {
    private static final int SLOTS = 16384;
    private final List<RedisServer> nodes = new ArrayList<>();

    @BeforeAll
    void start() {
        for (int i = 0; i < 3; i++) {
            nodes.add(new RedisServer(true));
        }
        for (int i = 0; i < 3; i++) {
            int first = i * SLOTS / 3;
            int last = (i + 1) * SLOTS / 3 - 1;
            nodes.get(i).call("CLUSTER", "ADDSLOTSRANGE", Integer.toString(first), Integer.toString(last));
        }
        for (RedisServer node : nodes.subList(1, 3)) {
            nodes.get(0).call("CLUSTER", "MEET", "127.0.0.1", Integer.toString(node.port));
        }
        RedisServer.waitUntil("the cluster to converge", 30_000, () -> nodes.stream().allMatch(n -> {
            String info = (String) n.call("CLUSTER", "INFO");
            return info.contains("cluster_state:ok") && info.contains("cluster_known_nodes:3");
        }));
    }

    @AfterAll
    void stop() {
        nodes.forEach(RedisServer::close);
    }

    private RedisServer owner(String key) {
        // Each node's range as startCluster assigns it (slot * 3 / SLOTS would put the last
        // slot of the first two ranges on the node before).
        int slot = JedisClusterCRC16.getSlot(key);
        int i = 0;
        while (slot > (i + 1) * SLOTS / 3 - 1) {
            i++;
        }
        return nodes.get(i);
    }

    /** The port of the master serving {@code slot} in {@code node}'s own view (0 if none). */
    private static long servingPort(RedisServer node, int slot) {
        for (Object range : (List<?>) node.call("CLUSTER", "SLOTS")) {
            List<?> row = (List<?>) range;
            if ((Long) row.get(0) <= slot && slot <= (Long) row.get(1)) {
                return (Long) ((List<?>) row.get(2)).get(1);
            }
        }
        return 0;
    }

    private ClusterConnectionProvider provider() {
        return new ClusterConnectionProvider(Set.of(nodes.get(0).hostAndPort()),
                DefaultJedisClientConfig.builder().socketTimeoutMillis(500).build());
    }

    @Test
    void everyLockKindAtItsSlotsMaster() throws Exception {
        try (ClusterConnectionProvider provider = provider();
                JedisCluster jedis = new JedisCluster(provider, 5, Duration.ofSeconds(10));
                Client client = Client.create(provider)) {
            Set<RedisServer> used = new HashSet<>();
            for (int i = 0; i < 12; i++) {
                String name = "c:lock:" + i;
                PlainLock lock = new PlainLock(client, name);
                assertTrue(lock.tryLock());
                RedisServer at = owner(name);
                used.add(at);
                assertEquals("1", at.call("HGET", name, lock.getOwner()));
                assertTrue(jedis.exists(name), "the user's JedisCluster sees it on the same provider");
                lock.unlock();
                assertEquals(0L, at.call("EXISTS", name));
            }
            assertEquals(3, used.size(), "names spread over the three masters");

            DistributedReadWriteLock rw = new DistributedReadWriteLock(client, "c:rw", LockOptions.defaults().withFenced(true));
            rw.writeLock().lock();
            assertTrue(rw.writeLock().getToken() > 0);
            assertEquals("write", owner("c:rw").call("HGET", "c:rw", "mode"));
            rw.writeLock().unlock();

            MultiLock multi = new MultiLock(client, List.of(Hold.lock("{acct}:1"), Hold.write("{acct}:2")));
            assertTrue(multi.tryLock(1, TimeUnit.SECONDS));
            assertEquals("write", owner("{acct}:2").call("HGET", "{acct}:2", "mode"));
            multi.unlock();

            // A wait past the 500 ms socket timeout, on the slot's master.
            RedisServer at = owner("c:wait");
            at.call("LOCK.ACQUIRE", "c:wait", "other:1", "10000");
            CompletableFuture.runAsync(() -> {
                RedisServer.sleep(1000);
                at.call("LOCK.UNLOCK", "c:wait", "other:1");
            });
            PlainLock waiter = new PlainLock(client, "c:wait");
            assertTrue(waiter.tryLock(5, TimeUnit.SECONDS));
            waiter.unlock();

            // An interrupt ends the wait on the right master.
            at.call("LOCK.ACQUIRE", "c:wait", "other:1", "10000");
            CompletableFuture<Throwable> outcome = new CompletableFuture<>();
            Thread thread = Waiters.lockInterruptibly(waiter, outcome);
            RedisServer.waitUntil("the waiter", 5000, () -> "1".equals(at.info("clients", "blocked_clients")));
            thread.interrupt();
            assertTrue(outcome.get(5, TimeUnit.SECONDS) instanceof InterruptedException);
            RedisServer.waitUntil("no waiter", 10_000, () -> "0".equals(at.info("clients", "blocked_clients")));
        }
    }

    @Test
    void aMovedSlotIsFollowed() throws Exception {
        try (ClusterConnectionProvider provider = provider(); Client client = Client.create(provider)) {
            String name = "c:moved";
            RedisServer from = owner(name);
            PlainLock lock = new PlainLock(client, name);
            assertTrue(lock.tryLock());
            lock.unlock();
            // Hand the (empty) slot to another master, behind the client's slot map.
            RedisServer to = nodes.get((nodes.indexOf(from) + 1) % 3);
            String slot = Long.toString(JedisClusterCRC16.getSlot(name));
            // The cycle wrote no latch: the slot is empty (when the owner has not yet heard the
            // target claim the slot, SETSLOT NODE refuses a slot that holds keys).
            assertEquals(0L, from.call("CLUSTER", "COUNTKEYSINSLOT", slot));
            // As a reshard does: IMPORTING and MIGRATING first, so that the target's SETSLOT NODE
            // raises its config epoch above every other node's. A bare SETSLOT NODE on each node
            // in turn can lose a race on a busy machine: gossip from a node not yet told still
            // claims the slot with a higher epoch and takes it back.
            String target = (String) to.call("CLUSTER", "MYID");
            to.call("CLUSTER", "SETSLOT", slot, "IMPORTING", (String) from.call("CLUSTER", "MYID"));
            from.call("CLUSTER", "SETSLOT", slot, "MIGRATING", target);
            for (RedisServer node : List.of(to, from, nodes.get((nodes.indexOf(from) + 2) % 3))) {
                node.call("CLUSTER", "SETSLOT", slot, "NODE", target);
            }
            for (RedisServer node : nodes) {
                RedisServer.waitUntil("every node's view of slot " + slot, 30_000,
                        () -> servingPort(node, Integer.parseInt(slot)) == to.port);
            }
            assertTrue(lock.tryLock());
            assertEquals("1", to.call("HGET", name, lock.getOwner()));
            assertThrows(JedisMovedDataException.class, () -> from.call("EXISTS", name), "the old master no longer serves it");
            lock.unlock();
            assertEquals(0L, to.call("EXISTS", name));
            HostAndPort now = provider.getNode(JedisClusterCRC16.getSlot(name));
            assertEquals(to.port, now.getPort(), "the slot map was re-read");
        }
    }
}
