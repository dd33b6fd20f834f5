package io.github.rwlock.client;

import redis.clients.jedis.Connection;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisPool;
import redis.clients.jedis.providers.ClusterConnectionProvider;
import redis.clients.jedis.util.JedisClusterCRC16;
import redis.clients.jedis.util.Pool;

/**
 * Where a lock's commands go: a connection of the pool serving its key, checked out of the
 * user's Jedis pool so that a waiting command has a connection of its own.
 */
interface Connector {
    /** A connection to the master of {@code key}'s slot. */
    Link open(String key);

    /** Another connection to the server {@code link} talks to (to end its wait). */
    Link beside(Link link);

    /** Releases what the connector made itself (never the user's pool). */
    void close();

    /** A standalone server through a pool of connections ({@code JedisPooled.getPool()}). */
    static Connector of(Pool<Connection> pool) {
        return new Connector() {
            @Override
            public Link open(String key) {
                Connection connection = pool.getResource();
                return new Link(connection, () -> giveBack(pool, connection), null, null);
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

    /** A standalone server through a {@link JedisPool}. */
    static Connector of(JedisPool pool) {
        return new Connector() {
            @Override
            public Link open(String key) {
                Jedis jedis = pool.getResource();
                return new Link(jedis.getConnection(), jedis::close, null, null);
            }

            @Override
            public Link beside(Link link) {
                return open("");
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
                return new Link(connection, connection::close, node, target -> {
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
