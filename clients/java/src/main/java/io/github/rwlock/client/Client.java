package io.github.rwlock.client;

import java.time.Duration;
import java.util.Objects;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledThreadPoolExecutor;
import java.util.concurrent.ThreadFactory;
import java.util.concurrent.atomic.AtomicInteger;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.Jedis;
import redis.clients.jedis.JedisClientConfig;
import redis.clients.jedis.JedisPooled;
import redis.clients.jedis.providers.ClusterConnectionProvider;
import redis.clients.jedis.providers.SentineledConnectionProvider;
import redis.clients.jedis.util.Pool;

/**
 * The locks' side of a Jedis client, as Redisson's {@code RedissonClient} is: one client UUID (so
 * owners are {@code <UUID>:<thread id>}, never shared with a Redisson instance or another {@code
 * Client}), the watchdog timeout, the replica sync policy, and the threads the watchdogs and
 * interruptible waits run on. Make one per Jedis pool and share it; lock objects take it as their
 * first argument. Thread-safe.
 *
 * <pre>{@code
 * JedisPooled jedis = new JedisPooled("127.0.0.1", 6399);
 * try (Client client = Client.create(jedis)) {
 *     PlainLock lock = new PlainLock(client, "invoice:42");
 *     ...
 * }
 * }</pre>
 *
 * <p>Each command is sent on a connection checked out of the Jedis pool for it, so a {@code BLOCK}
 * wait has a connection of its own and never stalls other commands; its reply is read with the
 * wait plus a margin as the socket timeout, so a wait longer than the pool's socket timeout
 * works.
 */
public final class Client implements AutoCloseable {
    /** Redisson's {@code lockWatchdogTimeout}: the lease of a hold taken without one. */
    public static final Duration DEFAULT_WATCHDOG_TIMEOUT = Duration.ofSeconds(30);

    private final Connector connector;
    private final String id;
    private final long watchdogTimeoutMs;
    private final ReplicaSync replicaSync;
    /**
     * What its acquisitions learned of the replicas (a new client starts over): one state for a
     * standalone or Sentinel deployment, whichever master it reaches; one per master in a cluster.
     */
    private final Masters masters = new Masters();
    /** Every lock object's holds per owner, for the {@code HELD} count their calls send. */
    private final HoldCounts holdCounts = new HoldCounts();
    private final ScheduledThreadPoolExecutor scheduler;
    private final ExecutorService waiters;

    private Client(Builder builder) {
        this.connector = builder.connector;
        this.id = builder.id != null ? builder.id : UUID.randomUUID().toString();
        this.watchdogTimeoutMs = builder.watchdogTimeout.toMillis();
        this.replicaSync = builder.replicaSync;
        this.scheduler = new ScheduledThreadPoolExecutor(2, daemons("rwlock-watchdog"));
        this.scheduler.setRemoveOnCancelPolicy(true);
        this.waiters = Executors.newCachedThreadPool(daemons("rwlock-wait"));
    }

    private static ThreadFactory daemons(String prefix) {
        AtomicInteger count = new AtomicInteger();
        return runnable -> {
            Thread thread = new Thread(runnable, prefix + "-" + count.incrementAndGet());
            thread.setDaemon(true);
            return thread;
        };
    }

    /**
     * A client on a standalone server's pool, with the defaults.
     *
     * @param jedis the pool ({@code JedisPooled}); it stays the caller's to close
     * @return the client
     */
    public static Client create(JedisPooled jedis) {
        return builder(jedis).build();
    }

    /**
     * A client on a pool of {@code Jedis}, with the defaults: a {@code JedisPool} (one server) or a
     * {@code JedisSentinelPool}, which follows the master Sentinel names from one failover to the
     * next (what the client learns of the replicas is the deployment's, kept across them).
     *
     * @param pool the pool; it stays the caller's to close
     * @return the client
     */
    public static Client create(Pool<Jedis> pool) {
        return builder(pool).build();
    }

    /**
     * A client on the master Sentinel names, with the defaults, through the provider a {@code
     * JedisSentineled} is built on: {@code new JedisSentineled(provider)} for your own commands
     * shares its connections. It follows the master from one failover to the next.
     *
     * @param provider the Sentinel-named master's connections; it stays the caller's to close
     * @return the client
     */
    public static Client create(SentineledConnectionProvider provider) {
        return builder(provider).build();
    }

    /**
     * A client on a Redis Cluster, with the defaults: every command goes to the master of its lock
     * name's slot. Build your own {@code JedisCluster} on the same provider ({@code new
     * JedisCluster(provider, maxAttempts, maxTotalRetriesDuration)}) to share its slot map.
     *
     * @param provider the cluster's connections; it stays the caller's to close
     * @return the client
     */
    public static Client create(ClusterConnectionProvider provider) {
        return builder(provider).build();
    }

    /**
     * Options for a client on a standalone server's pool.
     *
     * @param jedis the pool
     * @return a builder
     */
    public static Builder builder(JedisPooled jedis) {
        Objects.requireNonNull(jedis, "jedis");
        return new Builder(Connector.of(jedis.getPool()));
    }

    /**
     * Options for a client on a pool of {@code Jedis}: a {@code JedisPool} or a {@code
     * JedisSentinelPool}.
     *
     * @param pool the pool
     * @return a builder
     */
    public static Builder builder(Pool<Jedis> pool) {
        Objects.requireNonNull(pool, "pool");
        return new Builder(Connector.ofJedis(pool));
    }

    /**
     * Options for a client on the master Sentinel names, through a {@code JedisSentineled}'s
     * provider.
     *
     * @param provider the Sentinel-named master's connections
     * @return a builder
     */
    public static Builder builder(SentineledConnectionProvider provider) {
        Objects.requireNonNull(provider, "provider");
        return new Builder(Connector.of(provider));
    }

    /**
     * Options for a client on a Redis Cluster.
     *
     * @param provider the cluster's connections
     * @return a builder
     */
    public static Builder builder(ClusterConnectionProvider provider) {
        Objects.requireNonNull(provider, "provider");
        return new Builder(Connector.of(provider, false));
    }

    /**
     * Options for a client on a Redis Cluster reached through {@code nodes}, with connections of
     * its own (closed by {@link #close()}).
     *
     * @param nodes some of the cluster's nodes
     * @param config the connections' settings (timeouts, credentials, TLS)
     * @return a builder
     */
    public static Builder builder(Set<HostAndPort> nodes, JedisClientConfig config) {
        return new Builder(Connector.of(new ClusterConnectionProvider(nodes, config), true));
    }

    /**
     * This client's UUID, the first part of every owner it sends.
     *
     * @return the UUID, as text
     */
    public String getId() {
        return id;
    }

    /**
     * The lease of a hold taken without one, renewed every third of it.
     *
     * @return the watchdog timeout
     */
    public Duration getWatchdogTimeout() {
        return Duration.ofMillis(watchdogTimeoutMs);
    }

    /**
     * What an acquisition waits for after it is taken.
     *
     * @return the replica sync policy
     */
    public ReplicaSync getReplicaSync() {
        return replicaSync;
    }

    /**
     * The owner the calling thread sends, as Redisson forms it.
     *
     * @return {@code <client UUID>:<thread id>}
     */
    public String currentOwner() {
        return id + ":" + Thread.currentThread().getId();
    }

    Masters masters() {
        return masters;
    }

    HoldCounts holdCounts() {
        return holdCounts;
    }

    Connector connector() {
        return connector;
    }

    long watchdogTimeoutMs() {
        return watchdogTimeoutMs;
    }

    ScheduledExecutorService scheduler() {
        return scheduler;
    }

    ExecutorService waiters() {
        return waiters;
    }

    /**
     * Stops the watchdogs and the waits' threads (holds then last until their lease), and closes
     * the cluster connections this client made itself. The Jedis pool given stays open.
     */
    @Override
    public void close() {
        scheduler.shutdownNow();
        waiters.shutdownNow();
        connector.close();
    }

    /** A {@link Client}'s options. */
    public static final class Builder {
        private final Connector connector;
        private String id;
        private Duration watchdogTimeout = DEFAULT_WATCHDOG_TIMEOUT;
        private ReplicaSync replicaSync = ReplicaSync.DEFAULT;

        private Builder(Connector connector) {
            this.connector = connector;
        }

        /**
         * The client's UUID (default: a random one). Never give two clients, or a client and a
         * Redisson instance, the same one: their threads would share owners.
         *
         * @param id a UUID
         * @return this builder
         */
        public Builder clientId(UUID id) {
            this.id = Objects.requireNonNull(id, "id").toString();
            return this;
        }

        /**
         * The lease a hold taken without one gets, renewed every third of it (default 30 s,
         * Redisson's {@code lockWatchdogTimeout}).
         *
         * @param timeout at least 3 ms
         * @return this builder
         */
        public Builder watchdogTimeout(Duration timeout) {
            Objects.requireNonNull(timeout, "timeout");
            if (timeout.toMillis() < 3) {
                throw new IllegalArgumentException("the watchdog timeout must be at least 3 ms: " + timeout);
            }
            this.watchdogTimeout = timeout;
            return this;
        }

        /**
         * The replica acknowledgement after each acquisition (default {@link ReplicaSync#DEFAULT}).
         *
         * @param sync the policy
         * @return this builder
         */
        public Builder replicaSync(ReplicaSync sync) {
            this.replicaSync = Objects.requireNonNull(sync, "sync");
            return this;
        }

        /**
         * The client.
         *
         * @return a new client
         */
        public Client build() {
            return new Client(this);
        }
    }
}
