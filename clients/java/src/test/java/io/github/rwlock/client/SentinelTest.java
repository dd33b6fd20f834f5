package io.github.rwlock.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.JedisClientConfig;
import redis.clients.jedis.JedisSentinelPool;
import redis.clients.jedis.providers.SentineledConnectionProvider;

/**
 * A Sentinel deployment failing over under both of Jedis's Sentinel clients ({@code
 * JedisSentinelPool}, and the provider of {@code JedisSentineled}): the client follows the new
 * master, keeps the deployment's replica count across the failover (fail-closed where the new
 * master has fewer replicas), and an interrupt ends a wait left on the paused old master (by
 * closing its socket) as one on the current master (by CLIENT KILL there).
 */
class SentinelTest {
    private static final String NAME = "rwlock-java";
    /** Every wait for the deployment: a loaded 2-core machine makes Sentinel slow, never wrong. */
    private static final long CEILING_MS = 60_000;

    @Test
    void theClientFollowsAFailoverAndKeepsTheDeploymentsReplicaCount() throws Exception {
        try (RedisServer first = new RedisServer();
                RedisServer second = new RedisServer("--replicaof", "127.0.0.1", Integer.toString(first.port))) {
            RedisServer.waitUntil("the replica", CEILING_MS, () -> "1".equals(first.info("replication", "connected_slaves"))
                    && "up".equals(second.info("replication", "master_link_status")) && first.acknowledged());
            try (RedisServer sentinel = RedisServer.sentinel(NAME, first.port)) {
                // A failover needs a replica Sentinel has asked INFO of itself.
                RedisServer.waitUntil("Sentinel to know the replica", CEILING_MS, () -> replicaFlags(sentinel).equals("slave"));
                JedisClientConfig config = DefaultJedisClientConfig.builder().socketTimeoutMillis(10_000).build();
                Set<HostAndPort> sentinels = Set.of(sentinel.hostAndPort());
                try (JedisSentinelPool pool = new JedisSentinelPool(NAME, sentinels, config, config);
                        SentineledConnectionProvider provider = new SentineledConnectionProvider(NAME, config, sentinels,
                                config);
                        Client viaPool = Client.create(pool);
                        Client viaProvider = Client.create(provider)) {
                    List<Client> clients = List.of(viaPool, viaProvider);
                    long before = 0;
                    for (Client client : clients) {
                        try (Held held = PlainLock.fenced(client, "s:fenced").hold(Duration.ZERO, Duration.ofSeconds(10))) {
                            before = Math.max(before, held.token());
                        }
                        assertEquals(1, client.masters().expected(""), "learned from the first master");
                    }

                    // A waiter parked on the first master, which then pauses past its failover.
                    first.call("LOCK.ACQUIRE", "s:wait", "other:1", "600000");
                    PlainLock waited = new PlainLock(viaPool, "s:wait");
                    CompletableFuture<Throwable> outcome = new CompletableFuture<>();
                    Thread waiter = Waiters.lockInterruptibly(waited, outcome);
                    RedisServer.waitUntil("the waiter", CEILING_MS, () -> "1".equals(first.info("clients", "blocked_clients")));
                    first.signal("STOP");
                    RedisServer.waitUntil("both clients to follow the failover", CEILING_MS,
                            () -> pool.getCurrentHostMaster().getPort() == second.port
                                    && provider.getCurrentMaster().getPort() == second.port);
                    // The pool names another master now: CLIENT KILL there would name one of its
                    // own connections, so the waiting socket is closed instead, and the wait ends
                    // while the paused master still holds that connection open.
                    waiter.interrupt();
                    Throwable thrown = outcome.get(CEILING_MS, TimeUnit.MILLISECONDS);
                    assertTrue(thrown instanceof InterruptedException, String.valueOf(thrown));
                    // Paused, it can no longer come back and take the promoted node as its replica.
                    first.signal("KILL");

                    // The new master has no replica, and the deployment had one: fail closed.
                    second.call("CONFIG", "RESETSTAT");
                    for (Client client : clients) {
                        PlainLock lock = PlainLock.fenced(client, "s:fenced");
                        NotSyncedException e = assertThrows(NotSyncedException.class,
                                () -> lock.hold(Duration.ZERO, Duration.ofSeconds(10)));
                        assertTrue(e.getMessage().contains("WAIT 1 replied 0"), e.getMessage());
                        assertEquals(1, client.masters().expected(""), "never lowered by the new master");
                    }
                    assertEquals(2, second.calls("wait"), "both acquisitions went to the new master");
                    assertEquals(0L, second.call("EXISTS", "s:fenced"), "released again");

                    // A replica again: granted on the new master, with a higher token.
                    try (RedisServer third = new RedisServer("--replicaof", "127.0.0.1", Integer.toString(second.port))) {
                        RedisServer.waitUntil("the new replica", CEILING_MS,
                                () -> "1".equals(second.info("replication", "connected_slaves"))
                                        && "up".equals(third.info("replication", "master_link_status")) && second.acknowledged());
                        for (Client client : clients) {
                            try (Held held = PlainLock.fenced(client, "s:fenced").hold(Duration.ZERO, Duration.ofSeconds(10))) {
                                assertTrue(held.token() > before, held.token() + " after " + before);
                                assertEquals(1L, second.call("EXISTS", "s:fenced"));
                            }
                        }
                        assertEquals(0L, second.call("EXISTS", "s:fenced"));

                        // On the master the pool still names, an interrupt kills the waiting
                        // connection there.
                        second.call("LOCK.ACQUIRE", "s:again", "other:1", "600000");
                        second.call("CONFIG", "RESETSTAT");
                        PlainLock again = new PlainLock(viaProvider, "s:again");
                        CompletableFuture<Throwable> ended = new CompletableFuture<>();
                        Thread another = Waiters.lockInterruptibly(again, ended);
                        RedisServer.waitUntil("the waiter", CEILING_MS,
                                () -> "1".equals(second.info("clients", "blocked_clients")));
                        another.interrupt();
                        Throwable interrupted = ended.get(CEILING_MS, TimeUnit.MILLISECONDS);
                        assertTrue(interrupted instanceof InterruptedException, String.valueOf(interrupted));
                        assertEquals(1, second.calls("client|kill"));
                        RedisServer.waitUntil("no blocked client", CEILING_MS,
                                () -> "0".equals(second.info("clients", "blocked_clients")));
                    }
                }
            }
        }
    }

    /** The flags Sentinel gives the one replica it knows, or "" before it knows one. */
    private static String replicaFlags(RedisServer sentinel) {
        List<?> replicas = (List<?>) sentinel.call("SENTINEL", "REPLICAS", NAME);
        if (replicas.size() != 1) {
            return "";
        }
        List<?> fields = (List<?>) replicas.get(0);
        for (int i = 0; i + 1 < fields.size(); i += 2) {
            if ("flags".equals(fields.get(i))) {
                return String.valueOf(fields.get(i + 1));
            }
        }
        return "";
    }
}
