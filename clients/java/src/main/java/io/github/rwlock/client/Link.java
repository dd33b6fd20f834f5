package io.github.rwlock.client;

import java.nio.charset.StandardCharsets;
import java.util.List;
import java.util.function.Function;
import java.util.function.LongConsumer;
import redis.clients.jedis.Connection;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.commands.ProtocolCommand;
import redis.clients.jedis.exceptions.JedisDataException;
import redis.clients.jedis.exceptions.JedisMovedDataException;

/**
 * One pooled connection to the master serving a lock's key, checked out for a few calls (an
 * acquisition and its WAIT must share a connection) or, for a session hold, for the hold's whole
 * life. Not thread-safe: one thread uses a link at a time.
 */
final class Link {
    /** {@code timeoutMs} of {@link #call}: the connection's own socket timeout. */
    static final long DEFAULT = -1;

    private Connection connection;
    private Runnable giveBack;
    /** Read by an interrupted waiter's thread to reach the same server. */
    private volatile HostAndPort node;
    /** The master a Sentinel-following pool named before this connection was checked out. */
    private final HostAndPort named;
    private final Function<HostAndPort, Link> redirect;
    private boolean moved;

    /**
     * @param connection the checked-out connection
     * @param giveBack returns it to its pool (a broken one is destroyed there)
     * @param node the server it is connected to, or {@code null} for a standalone server
     * @param named the master a pool following Sentinel named just before the checkout (the
     *     connection is to it or to a later one), or {@code null}
     * @param redirect a link to another master after a MOVED reply (re-reading the slot map), or
     *     {@code null} outside a cluster
     */
    Link(Connection connection, Runnable giveBack, HostAndPort node, HostAndPort named,
            Function<HostAndPort, Link> redirect) {
        this.connection = connection;
        this.giveBack = giveBack;
        this.node = node;
        this.named = named;
        this.redirect = redirect;
    }

    /** The server this link talks to ({@code null}: the standalone server). */
    HostAndPort node() {
        return node;
    }

    /** The master a Sentinel-following pool named when this link was checked out, or null. */
    HostAndPort named() {
        return named;
    }

    /**
     * The key of what is learned of this link's master: its address in a cluster, its own shard's;
     * outside a cluster one key for every server the pool reaches, all one deployment's (Sentinel
     * promotes one of the replicas), so a new master inherits the replicas its deployment was seen
     * with: one first met while a replica restarts reports one fewer, and a count learned afresh
     * from it would acknowledge grants a second failover loses (docs/safety.md).
     */
    String master() {
        return node == null ? "" : node.toString();
    }

    /**
     * Sends {@code commands} in one write and reads every reply, an error reply as its {@link
     * JedisDataException} (so every reply is read whatever the first said), within {@code
     * timeoutMs} as {@link #call}. With {@code onId}, {@code CLIENT ID} goes first in the same
     * write, as {@link #callIdentified}. A MOVED first reply is left to the caller ({@link
     * #follow}): what follows the command may depend on the master.
     */
    List<Object> pipeline(List<List<String>> commands, long timeoutMs, LongConsumer onId) {
        int own = connection.getSoTimeout();
        if (timeoutMs != DEFAULT) {
            connection.setSoTimeout((int) Math.min(timeoutMs, Integer.MAX_VALUE));
        }
        try {
            if (onId != null) {
                connection.sendCommand(new Name("CLIENT"), "ID");
            }
            for (List<String> args : commands) {
                connection.sendCommand(new Name(args.get(0)), args.subList(1, args.size()).toArray(new String[0]));
            }
            if (onId != null) {
                onId.accept(Plan.integer(connection.getOne()));
            }
            return connection.getMany(commands.size());
        } finally {
            if (timeoutMs != DEFAULT && !connection.isBroken()) {
                connection.setSoTimeout(own);
            }
        }
    }

    /**
     * Moves this link to the master a MOVED reply names (re-reading the slot map), once; false
     * outside a cluster or when it moved already.
     */
    boolean follow(JedisMovedDataException e) {
        if (redirect == null || moved) {
            return false;
        }
        moved = true;
        Link target = redirect.apply(e.getTargetNode());
        giveBack.run();
        connection = target.connection;
        giveBack = target.giveBack;
        node = target.node;
        return true;
    }

    /**
     * Sends one command and reads its reply within {@code timeoutMs} ({@link #DEFAULT}: the
     * connection's socket timeout; 0: without limit), however short the socket timeout is: a
     * {@code BLOCK} wait's reply comes when the wait ends. A reply that did not come in time
     * leaves the connection broken: the pool destroys it, which also ends the server's wait. In a
     * cluster, a MOVED reply (the slot was resharded) re-reads the slot map and sends the command
     * to the slot's new master, once.
     */
    Object call(List<String> args, long timeoutMs) {
        return callIdentified(args, timeoutMs, null);
    }

    /**
     * {@link #call}, with {@code CLIENT ID} sent before the command in the same write; {@code
     * onId} gets the connection's id before the command's reply is read, so that another thread
     * can end the wait ({@code CLIENT KILL ID}).
     */
    Object callIdentified(List<String> args, long timeoutMs, LongConsumer onId) {
        try {
            return send(args, timeoutMs, onId);
        } catch (JedisMovedDataException e) {
            if (!follow(e)) {
                throw e;
            }
            return send(args, timeoutMs, onId);
        }
    }

    /** A pipeline of one command, its error reply thrown (MOVED included, for the caller to follow). */
    private Object send(List<String> args, long timeoutMs, LongConsumer onId) {
        Object reply = pipeline(List.of(args), timeoutMs, onId).get(0);
        if (reply instanceof JedisDataException e) {
            throw e;
        }
        return reply;
    }

    /** Back to the pool (destroyed there if a call broke it). */
    void close() {
        giveBack.run();
    }

    /**
     * Closes the socket from another thread than the one reading it: that read fails at once, and
     * the server drops what waits on the connection when it sees it closed.
     */
    void abort() {
        connection.disconnect();
    }

    /** Closes the connection itself: the server ends what is bound to it (a session's holds). */
    void drop() {
        connection.setBroken();
        giveBack.run();
    }

    /** Any command name, as Jedis sends it. */
    private record Name(String name) implements ProtocolCommand {
        @Override
        public byte[] getRaw() {
            return name.getBytes(StandardCharsets.UTF_8);
        }
    }
}
