package io.github.rwlock.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.UUID;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.Test;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;

/** RedLock over 5 independent servers, some of them stopped. */
class RedLockTest {
    private final List<RedisServer> servers = new ArrayList<>();

    @AfterEach
    void stop() {
        servers.forEach(RedisServer::close);
    }

    private List<HostAndPort> start(int n) {
        List<HostAndPort> nodes = new ArrayList<>();
        for (int i = 0; i < n; i++) {
            RedisServer server = new RedisServer();
            servers.add(server);
            nodes.add(server.hostAndPort());
        }
        return nodes;
    }

    private long holders(String name, String owner) {
        long count = 0;
        for (RedisServer server : servers) {
            if (server.running() && server.call("HGET", name, owner) != null) {
                count++;
            }
        }
        return count;
    }

    @Test
    void aMajorityAcquiresAndAMinorityRefuses() throws Exception {
        List<HostAndPort> nodes = start(5);
        // A node timeout above the default 100 ms: a connection's first handshake on a loaded
        // test machine may take longer, and the first assertion counts all 5 nodes.
        try (RedLock red = new RedLock(nodes, "r:lock", DefaultJedisClientConfig.builder().build(),
                Duration.ofMillis(1000), Duration.ofMillis(200), UUID.randomUUID())) {
            long began = System.nanoTime();
            Duration validity = red.acquire(Duration.ZERO, Duration.ofSeconds(10));
            // The lease less the drift and the time the attempt took, however long a loaded
            // machine made it (1 ms for the rounding to milliseconds).
            long least = 10_000 - RedLock.drift(10_000) - TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - began) - 1;
            assertNotNull(validity);
            assertTrue(validity.toMillis() >= least && validity.toMillis() <= 10_000, validity + ", least " + least);
            assertEquals(5, holders("r:lock", red.getOwner()));
            assertTrue(red.validity().toMillis() > 0);
            red.unlock();
            assertEquals(0, holders("r:lock", red.getOwner()));
            assertThrows(NotHeldException.class, red::unlock);

            servers.get(0).stop();
            servers.get(1).stop();
            assertTrue(red.tryLock(0, 10, TimeUnit.SECONDS), "3 of 5 is a majority");
            assertEquals(3, holders("r:lock", red.getOwner()));
            red.unlock();

            servers.get(2).stop();
            long start = System.nanoTime();
            assertFalse(red.tryLock(500, 10_000, TimeUnit.MILLISECONDS), "2 of 5 is not");
            // At the end of its 500 ms wait (stopped nodes refuse connections at once), not after
            // retries past it: 4 s leave a loaded machine room.
            assertTrue(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start) < 4000);
            assertEquals(0, holders("r:lock", red.getOwner()), "nothing left held");
            assertEquals(Duration.ZERO, red.validity());
        }
    }

    @Test
    void anotherOwnerHoldingAMajorityRefuses() throws Exception {
        List<HostAndPort> nodes = start(5);
        try (RedLock first = new RedLock(nodes, "r:busy");
                RedLock second = new RedLock(nodes, "r:busy", DefaultJedisClientConfig.builder().build(),
                        Duration.ofMillis(100), Duration.ofMillis(50), UUID.randomUUID())) {
            assertTrue(first.tryLock());
            assertNull(second.acquire(Duration.ofMillis(300), Duration.ofSeconds(5)));
            assertEquals(0, holders("r:busy", second.getOwner()));
            first.unlock();
            assertNotNull(second.acquire(Duration.ZERO, Duration.ofSeconds(5)));
            second.unlock();
        }
    }
}
