package io.github.rwlock.client;

import java.util.Objects;
import java.util.function.Function;
import java.util.function.Supplier;
import redis.clients.jedis.Connection;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisSentinelPool;
import redis.clients.jedis.providers.ClusterConnectionProvider;
import redis.clients.jedis.providers.SentineledConnectionProvider;
import redis.clients.jedis.util.JedisClusterCRC16;
import redis.clients.jedis.util.Pool;

/**
 * Where a lock's commands go: a connection of the pool serving its key, checked out of the
 * user's Jedis pool so that a waiting command has a connection of its own.
 */
interface Connector {
    /** A connection to the master of {@code key}'s slot. */
    Link open(String key);

    /**
     * Another connection to the server {@code link} talks to (to end its wait), or {@code null}
     * when the connector now reaches another server (a Sentinel pool followed a failover since
     * {@code link} was checked out).
     */
    Link beside(Link link);

    /** Releases what the connector made itself (never the user's pool). */
    void close();

    /** A standalone server through a pool of connections ({@code JedisPooled.getPool()}). */
    static Connector of(Pool<Connection> pool) {
        return new Connector() {
            @Override
            public Link open(String key) {
                Connection connection = pool.getResource();
                return new Link(connection, () -> giveBack(pool, connection), null, null, null);
            }

            @Override
            public Link beside(Link link) {
                return open("");
            }

            @Override
            public void close() {}
        };
    }

    private static void giveBack(Pool<Connection> pool, Connection connection) {
        if (connection.isBroken()) {
            pool.returnBrokenResource(connection);
            // The pool destroys it by calling its close(), which for a connection checked out of
            // a ConnectionPool only hands it back to the pool again (ignored there): the socket
            // would stay open, and with it, on the server, whatever is bound to that connection
            // (a session hold whose reply was lost). Close the socket here.
            connection.disconnect();
        } else {
            pool.returnResource(connection);
        }
    }

    /**
     * A pool of {@link Jedis}: a {@code JedisPool} (one server), or a {@link JedisSentinelPool},
     * which Sentinel's {@code +switch-master} moves to each new master and which hands out
     * connections to the current master only.
     */
    static Connector ofJedis(Pool<Jedis> pool) {
        Supplier<HostAndPort> master = pool instanceof JedisSentinelPool sentinel ? sentinel::getCurrentHostMaster
                : () -> null;
        return following(master, named -> {
            Jedis jedis = pool.getResource();
            return new Link(jedis.getConnection(), jedis::close, null, named, null);
        });
    }

    /**
     * The master Sentinel names, through the provider a {@code JedisSentineled} is built on
     * ({@code new JedisSentineled(provider)}): it moves its pool to each new master.
     */
    static Connector of(SentineledConnectionProvider provider) {
        return following(provider::getCurrentMaster, named -> {
            Connection connection = provider.getConnection();
            return new Link(connection, connection::close, null, named, null);
        });
    }

    /**
     * A pool that may follow the master from one server to another: each link is tagged with the
     * master named before its connection was checked out ({@code null}: a pool of one server), so
     * that the connection is to that master or a later one. {@code CLIENT KILL ID} must reach the
     * waiting connection's own server (another server's connection of that id is someone else's),
     * so {@link #beside} gives a connection only while the tag, the new link's and the master named
     * after its checkout are all one.
     */
    private static Connector following(Supplier<HostAndPort> master, Function<HostAndPort, Link> checkout) {
        return new Connector() {
            @Override
            public Link open(String key) {
                return checkout.apply(master.get());
            }

            @Override
            public Link beside(Link link) {
                Link other = open("");
                HostAndPort after = master.get();
                if (Objects.equals(link.named(), other.named()) && Objects.equals(other.named(), after)) {
                    return other;
                }
                other.close();
                return null;
            }

            @Override
            public void close() {}
        };
    }

    /**
     * A Redis Cluster: each key's slot master, from the provider's slot map (shared with a {@code
     * JedisCluster} built on it). {@code owned}: closed with the connector.
     */
    static Connector of(ClusterConnectionProvider provider, boolean owned) {
        return new Connector() {
            @Override
            public Link open(String key) {
                int slot = JedisClusterCRC16.getSlot(key);
                HostAndPort node = provider.getNode(slot);
                if (node == null) {
                    provider.renewSlotCache();
                    node = provider.getNode(slot);
                }
                if (node == null) {
                    throw new IllegalStateException("no master serves the slot " + slot + " of " + key);
                }
                return at(node);
            }

            private Link at(HostAndPort node) {
                Connection connection = provider.getConnection(node);
                return new Link(connection, connection::close, node, null, target -> {
                    provider.renewSlotCache();
                    return at(target);
                });
            }

            @Override
            public Link beside(Link link) {
                return at(link.node());
            }

            @Override
            public void close() {
                if (owned) {
                    provider.close();
                }
            }
        };
    }
}
