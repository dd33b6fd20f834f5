package rwlock.redisson;

import io.github.rwlock.client.Client;
import redis.clients.jedis.JedisPooled;

/**
 * Our Java client (clients/java, compiled with these tests) on one server: a Jedis pool of its own
 * and a {@link Client} with the defaults, closed together.
 */
final class OurClient implements AutoCloseable {
    private final JedisPooled pool;
    /** The client. */
    final Client client;

    OurClient(Servers.Server server) {
        this.pool = new JedisPooled("127.0.0.1", server.port);
        this.client = Client.create(pool);
    }

    @Override
    public void close() {
        client.close();
        pool.close();
    }
}
