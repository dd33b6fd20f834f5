package rwlock.redisson;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.List;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisClientConfig;
import redis.clients.jedis.commands.ProtocolCommand;

/**
 * A connection of its own for the module's commands (and raw reads such as
 * PTTL), beside Redisson's: Jedis, so nothing here shares Redisson's
 * multiplexed connections, and a {@code BLOCK} stalls only this one. In
 * the cluster tests each connection goes to the master of its lock's slot.
 * Replies are decoded to String, Long, List and null.
 */
final class Raw implements AutoCloseable {
    private static final JedisClientConfig CONFIG = DefaultJedisClientConfig.builder()
            .socketTimeoutMillis(30_000).connectionTimeoutMillis(2_000).build();

    private final Jedis jedis;

    /** A connection to one server. */
    Raw(int port) {
        this.jedis = new Jedis(new HostAndPort("127.0.0.1", port), CONFIG);
    }

    private static ProtocolCommand command(String name) {
        byte[] raw = name.getBytes(StandardCharsets.UTF_8);
        return () -> raw;
    }

    /** Sends a command; a server error is thrown as JedisDataException. */
    Object call(String name, String... args) {
        Object reply = jedis.sendCommand(command(name), args);
        return decode(reply);
    }

    /** Sends a command that may wait on the server (no socket timeout). */
    Object callBlocking(String name, String... args) {
        Object reply = jedis.sendBlockingCommand(command(name), args);
        return decode(reply);
    }

    /** PTTL of a key in milliseconds. */
    long pttl(String key) {
        return (Long) call("PTTL", key);
    }

    static Object decode(Object reply) {
        if (reply instanceof byte[]) {
            return new String((byte[]) reply, StandardCharsets.UTF_8);
        }
        if (reply instanceof List) {
            List<Object> out = new ArrayList<>();
            for (Object item : (List<?>) reply) {
                out.add(decode(item));
            }
            return out;
        }
        return reply;
    }

    @Override
    public void close() {
        jedis.close();
    }
}
