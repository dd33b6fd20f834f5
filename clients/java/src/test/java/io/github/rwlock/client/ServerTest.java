package io.github.rwlock.client;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.TestInstance;
import redis.clients.jedis.JedisPooled;

/**
 * What a test class against one server shares: the server with the module (started before the
 * class's tests, stopped by its PID after them), a pooled connection to it, and a fresh {@link
 * Client} on an emptied server (statistics reset) for every test.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
abstract class ServerTest {
    /** The server with the module. */
    RedisServer server;
    /** A pool on it, the client's. */
    JedisPooled jedis;
    /** This test's client: its own UUID. */
    Client client;

    @BeforeAll
    void start() {
        server = new RedisServer();
        jedis = server.pooled();
    }

    @AfterAll
    void stop() {
        if (jedis != null) {
            jedis.close();
        }
        if (server != null) {
            server.close();
        }
    }

    @BeforeEach
    void empty() {
        server.call("FLUSHALL");
        server.call("CONFIG", "RESETSTAT");
        client = Client.create(jedis);
    }

    @AfterEach
    void closeClient() {
        client.close();
    }
}
