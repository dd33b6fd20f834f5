package io.github.rwlock.client;

import java.time.Duration;
import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.Objects;
import java.util.UUID;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.locks.Condition;
import redis.clients.jedis.Connection;
import redis.clients.jedis.ConnectionPool;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.JedisClientConfig;
import redis.clients.jedis.exceptions.JedisException;

/**
 * The Redlock algorithm over several independent masters (not one cluster's nodes, nor a master
 * and its replicas), each with the module. <b>Deprecated by Redisson since 3.12.5; prefer a
 * fenced {@link PlainLock}.</b>
 *
 * <p>Martin Kleppmann's analysis ("How to do distributed locking", 2016) showed that a
 * lease-based lock cannot by itself stop a holder that paused (GC, swapping, a network delay)
 * past its lease from acting after the next holder started, and that Redlock's safety further
 * rests on bounded clock drift and pauses across the nodes, and on nodes not restarting without
 * their data, which real systems do not guarantee. Redlock adds availability (a minority of nodes
 * may be down), not correctness. When correctness matters, use one fenced lock on a master with
 * replicas and {@link ReplicaSync}, send its token with every write, and have the storage refuse
 * a token lower than the highest it has seen.
 *
 * <p>The algorithm: take the lock on each node in turn ({@code LOCK.ACQUIRE}, no wait), each
 * bounded by the node timeout (100 ms, no retry); it is held when a majority (N/2 + 1) said yes
 * with validity left, validity = lease − elapsed − drift (drift = 1% of the lease + 2 ms).
 * Otherwise release on every node and retry after a random pause until the wait runs out. No
 * watchdog: pick a lease longer than the work.
 */
public final class RedLock implements java.util.concurrent.locks.Lock, AutoCloseable {
    /** The lease {@link #lock()} and the {@code tryLock}s without one use. */
    public static final Duration DEFAULT_LEASE = Duration.ofSeconds(30);

    private final List<ConnectionPool> nodes = new ArrayList<>();
    private final String name;
    private final String clientId;
    private final long nodeTimeoutMs;
    private final long retryDelayMs;
    private final Plan plan;
    private final Map<String, Long> validUntil = new ConcurrentHashMap<>();

    /**
     * A RedLock over {@code nodes} with the defaults: no credentials, node timeout 100 ms, retry
     * pause up to 200 ms, a random client UUID.
     *
     * @param nodes the masters, at least one
     * @param name the lock's name on each
     */
    public RedLock(List<HostAndPort> nodes, String name) {
        this(nodes, name, DefaultJedisClientConfig.builder().build(), Duration.ofMillis(100),
                Duration.ofMillis(200), UUID.randomUUID());
    }

    /**
     * A RedLock over {@code nodes}, reached through connections of its own.
     *
     * @param nodes the masters, at least one
     * @param name the lock's name on each
     * @param config the connections' settings (credentials, TLS); their timeouts are replaced
     *     by {@code nodeTimeout}
     * @param nodeTimeout how long each node has to connect and answer, small against the lease
     * @param retryDelay the upper bound of the random pause between attempts
     * @param clientId the UUID of the owners this RedLock sends
     */
    public RedLock(List<HostAndPort> nodes, String name, JedisClientConfig config, Duration nodeTimeout,
            Duration retryDelay, UUID clientId) {
        if (nodes.isEmpty()) {
            throw new IllegalArgumentException("a RedLock needs at least one node");
        }
        this.name = DistributedLock.checkName(name);
        this.clientId = Objects.requireNonNull(clientId, "clientId").toString();
        this.nodeTimeoutMs = Durations.leaseMs(nodeTimeout);
        this.retryDelayMs = Durations.leaseMs(retryDelay);
        this.plan = Plan.single(Hold.lock(name), false, true);
        int timeout = (int) Math.min(nodeTimeoutMs, Integer.MAX_VALUE);
        JedisClientConfig bounded = DefaultJedisClientConfig.builder()
                .from(config)
                .connectionTimeoutMillis(timeout)
                .socketTimeoutMillis(timeout)
                .build();
        for (HostAndPort node : nodes) {
            this.nodes.add(new ConnectionPool(node, bounded));
        }
    }

    /**
     * The lock's name.
     *
     * @return the key on every node
     */
    public String getName() {
        return name;
    }

    /**
     * The calling thread's owner.
     *
     * @return {@code <client UUID>:<thread id>}
     */
    public String getOwner() {
        return clientId + ":" + Thread.currentThread().getId();
    }

    /**
     * Tries until {@code wait} has passed (zero: one attempt).
     *
     * @param wait how long to keep trying; {@code null} without limit
     * @param lease how long each node keeps the lock
     * @return the validity (how long the hold is safe to use, counted from the winning attempt's
     *     start), or {@code null} when no attempt won a majority (nothing is left held)
     * @throws InterruptedException interrupted during a pause between attempts
     */
    public Duration acquire(Duration wait, Duration lease) throws InterruptedException {
        long leaseMs = Durations.leaseMs(lease);
        String owner = getOwner();
        long deadline = wait == null ? Long.MAX_VALUE : System.nanoTime() + Durations.waitMs(wait) * 1_000_000;
        while (true) {
            long start = System.nanoTime();
            int granted = 0;
            for (ConnectionPool node : nodes) {
                if (tryNode(node, owner, leaseMs)) {
                    granted++;
                }
            }
            long elapsedMs = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            long validity = leaseMs - elapsedMs - drift(leaseMs);
            if (granted >= quorum(nodes.size()) && validity > 0) {
                validUntil.put(owner, start + validity * 1_000_000);
                return Duration.ofMillis(validity);
            }
            releaseAll(owner);
            long pause = ThreadLocalRandom.current().nextLong(retryDelayMs + 1);
            if (deadline != Long.MAX_VALUE && System.nanoTime() + pause * 1_000_000 >= deadline) {
                return null;
            }
            Thread.sleep(pause);
        }
    }

    /**
     * The majority of {@code nodes}.
     *
     * @param nodes how many nodes
     * @return N/2 + 1
     */
    static int quorum(int nodes) {
        return nodes / 2 + 1;
    }

    /** The Redlock paper's allowance for clock drift between nodes. */
    static long drift(long leaseMs) {
        return leaseMs / 100 + 2;
    }

    private boolean tryNode(ConnectionPool node, String owner, long leaseMs) {
        try {
            // No HELD: a node is asked once, never resent (a lost reply counts as a no, and
            // the holds of a failed round are released on every node).
            return plan.outcome(call(node, plan.acquire(owner, leaseMs, Plan.NO_BLOCK, false, null))).acquired();
        } catch (JedisException e) {
            return false; // down, slow or refusing: this node did not say yes
        }
    }

    private int releaseAll(String owner) {
        int released = 0;
        for (ConnectionPool node : nodes) {
            try {
                if (call(node, plan.release(owner, DEFAULT_LEASE.toMillis(), null)) != null) {
                    released++;
                }
            } catch (JedisException e) {
                // Unreachable: its hold ends with the lease.
            }
        }
        return released;
    }

    private static Object call(ConnectionPool node, List<String> args) {
        Connection connection = node.getResource();
        Link link = new Link(connection, connection::close, null, null, null);
        try {
            return link.call(args, Link.DEFAULT);
        } finally {
            link.close();
        }
    }

    /**
     * How long the calling thread's hold has left.
     *
     * @return the validity left, zero when none
     */
    public Duration validity() {
        Long until = validUntil.get(getOwner());
        return until == null ? Duration.ZERO : Duration.ofNanos(Math.max(0, until - System.nanoTime()));
    }

    /**
     * Tries without limit, with the default lease. Not interruptible.
     */
    @Override
    public void lock() {
        boolean interrupted = false;
        while (true) {
            try {
                acquire(null, DEFAULT_LEASE);
                break;
            } catch (InterruptedException e) {
                interrupted = true;
            }
        }
        if (interrupted) {
            Thread.currentThread().interrupt();
        }
    }

    /**
     * Tries without limit, with the default lease.
     *
     * @throws InterruptedException interrupted during a pause between attempts
     */
    @Override
    public void lockInterruptibly() throws InterruptedException {
        acquire(null, DEFAULT_LEASE);
    }

    /**
     * One attempt, with the default lease.
     *
     * @return whether a majority granted it
     */
    @Override
    public boolean tryLock() {
        try {
            return acquire(Duration.ZERO, DEFAULT_LEASE) != null;
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            return false;
        }
    }

    /**
     * Tries until {@code wait} has passed, with the default lease.
     *
     * @param wait how long to keep trying
     * @param unit its unit
     * @return whether a majority granted it
     * @throws InterruptedException interrupted during a pause between attempts
     */
    @Override
    public boolean tryLock(long wait, TimeUnit unit) throws InterruptedException {
        return acquire(Duration.ofMillis(Durations.waitMs(wait, unit)), DEFAULT_LEASE) != null;
    }

    /**
     * Tries until {@code wait} has passed, each node keeping the lock for {@code lease}.
     *
     * @param wait how long to keep trying
     * @param lease how long each node keeps the lock
     * @param unit the unit of both
     * @return whether a majority granted it
     * @throws InterruptedException interrupted during a pause between attempts
     */
    public boolean tryLock(long wait, long lease, TimeUnit unit) throws InterruptedException {
        return acquire(Duration.ofMillis(Durations.waitMs(wait, unit)),
                Duration.ofMillis(Durations.leaseMs(lease, unit))) != null;
    }

    /**
     * Releases on every node.
     *
     * @throws NotHeldException the owner held it on no node
     */
    @Override
    public void unlock() {
        String owner = getOwner();
        validUntil.remove(owner);
        if (releaseAll(owner) == 0) {
            throw new NotHeldException(name + " is not held by " + owner + " on any node");
        }
    }

    /**
     * Not supported.
     *
     * @return never
     * @throws UnsupportedOperationException always
     */
    @Override
    public Condition newCondition() {
        throw new UnsupportedOperationException("a distributed lock has no conditions");
    }

    /** Closes the connections to the nodes (holds last until their lease). */
    @Override
    public void close() {
        for (ConnectionPool node : nodes) {
            node.close();
        }
    }
}
