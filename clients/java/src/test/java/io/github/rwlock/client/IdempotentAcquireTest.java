package io.github.rwlock.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Set;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.JedisPooled;

/**
 * Acquisitions carry {@code HELD n} (the owner's count before them), and a lost reply is resent
 * once, the same: a real fault, a proxy ({@link FaultProxy}) that forwards the acquisition and
 * closes the connection (or holds the reply back until the read times out) before its reply
 * reaches the client. The acquisition still succeeds, and the server shows exactly one hold, for
 * every kind, with and without {@code SESSION} (which sends no {@code HELD}) and {@code BLOCK}.
 */
class IdempotentAcquireTest extends ServerTest {
    private static final Set<String> ACQUISITIONS = Set.of("LOCK.ACQUIRE", "RWLOCK.READ", "RWLOCK.WRITE", "FAIRLOCK.ACQUIRE");
    /**
     * The muted pool's socket timeout: a swallowed reply of a single try times out after it (and
     * an ordinary reply on a loaded machine must come within it).
     */
    private static final int SOCKET_TIMEOUT_MS = 2_000;
    /** The other tests' pool: a reply the proxy drops closes the connection, so only load waits. */
    private static final int PATIENT_TIMEOUT_MS = 10_000;

    private FaultProxy proxy;
    private JedisPooled proxied;
    private JedisPooled muted;

    @BeforeAll
    void startProxy() throws Exception {
        proxy = new FaultProxy(server.hostAndPort(), ACQUISITIONS);
        proxied = new JedisPooled(proxy.hostAndPort(),
                DefaultJedisClientConfig.builder().socketTimeoutMillis(PATIENT_TIMEOUT_MS).build());
        muted = new JedisPooled(proxy.hostAndPort(),
                DefaultJedisClientConfig.builder().socketTimeoutMillis(SOCKET_TIMEOUT_MS).build());
    }

    @AfterAll
    void stopProxy() {
        if (muted != null) {
            muted.close();
        }
        if (proxied != null) {
            proxied.close();
        }
        if (proxy != null) {
            proxy.close();
        }
    }

    /** How the lost acquisition is made. */
    private enum Way {
        /** {@code tryLock()}: one command, no BLOCK. */
        TRY,
        /** {@code tryLock(5 s)} while another owner holds it: BLOCK 5000 on a wait thread. */
        WAIT,
        /** {@code lock(lease)} while another owner holds it: BLOCK 0 on the calling thread. */
        FOREVER
    }

    private DistributedLock lock(Client on, String kind, String name, boolean session) {
        LockOptions options = LockOptions.defaults().withSession(session);
        return switch (kind) {
            case "plain" -> new PlainLock(on, name, options);
            case "fenced" -> new PlainLock(on, name, options.withFenced(true));
            case "nonreentrant" -> new PlainLock(on, name, options.withReentrant(false));
            case "read" -> new DistributedReadWriteLock(on, name, options).readLock();
            case "write" -> new DistributedReadWriteLock(on, name, options).writeLock();
            case "fair" -> new FairLock(on, name, options);
            default -> throw new IllegalArgumentException(kind);
        };
    }

    /** The hash field counting the owner's holds of this kind. */
    private static String field(String kind, String owner) {
        return kind.equals("write") ? owner + ":write" : owner;
    }

    /** Someone else's hold that keeps {@code kind} out, until {@link #releaseOther}. */
    private void holdOther(String kind, String name) {
        if (kind.equals("read") || kind.equals("write")) {
            server.call("RWLOCK.WRITE", name, "other:1", "20000");
        } else if (kind.equals("fair")) {
            server.call("FAIRLOCK.ACQUIRE", name, "other:1", "20000");
        } else {
            server.call("LOCK.ACQUIRE", name, "other:1", "20000");
        }
    }

    private void releaseOther(String kind, String name) {
        if (kind.equals("read") || kind.equals("write")) {
            assertEquals(1L, server.call("RWLOCK.UNLOCK", name, "other:1", "WRITE"));
        } else if (kind.equals("fair")) {
            assertEquals(1L, server.call("FAIRLOCK.UNLOCK", name, "other:1"));
        } else {
            assertEquals(1L, server.call("LOCK.UNLOCK", name, "other:1"));
        }
    }

    private void lostReply(String kind, boolean session, Way way, boolean swallow) throws Exception {
        String name = "idem:" + kind + ":" + session + ":" + way + ":" + swallow;
        ExecutorService thread = Executors.newSingleThreadExecutor();
        try (Client on = Client.create(swallow ? muted : proxied)) {
            DistributedLock lock = lock(on, kind, name, session);
            String owner = thread.submit(lock::getOwner).get();
            int before = proxy.seen().size();
            if (way != Way.TRY) {
                holdOther(kind, name);
            }
            server.call("CONFIG", "RESETSTAT");
            if (swallow) {
                proxy.armSwallow();
            } else {
                proxy.arm();
            }
            Future<Boolean> taken = thread.submit(() -> switch (way) {
                case TRY -> lock.tryLock();
                case WAIT -> lock.tryLock(5, TimeUnit.SECONDS);
                case FOREVER -> {
                    lock.lock(20, TimeUnit.SECONDS);
                    yield true;
                }
            });
            if (way != Way.TRY) {
                await("the acquisition waits on the server", 5_000,
                        () -> Long.parseLong(server.info("clients", "blocked_clients")) > 0);
                releaseOther(kind, name);
            }
            assertTrue(taken.get(20, TimeUnit.SECONDS), name + ": acquired despite the lost reply");
            assertTrue(proxy.dropped(), name + ": the proxy lost the reply");
            List<List<String>> sent = proxy.seen().subList(before, proxy.seen().size());
            assertEquals(2, sent.size(), name + ": the acquisition and one resend: " + sent);
            assertEquals(owner, sent.get(0).get(2));
            assertEquals(owner, sent.get(1).get(2));
            for (List<String> command : sent) {
                assertFalse(command.contains("REQUEST"), "no request id, no latch: " + command);
                if (session) {
                    // Its hold went with its connection: a resend is a new acquisition, never a
                    // replay of a grant the server is about to give back.
                    assertEquals(-1L, option(command, "HELD"), "a session acquisition sends no HELD: " + command);
                } else {
                    assertEquals(0L, option(command, "HELD"), "both say the owner held none before: " + command);
                }
                if (kind.equals("fair") && block(command) > 0) {
                    assertEquals(block(command), option(command, "WAIT"), "a fair wait sends its wait as WAIT: " + command);
                }
            }
            if (kind.equals("fair")) {
                assertEquals(way == Way.TRY ? 0 : 1, server.calls("fairlock.cancel"),
                        "a fair wait lost on I/O leaves the line before its resend (a served one stays served)");
            }
            assertEquals(0, server.calls("pexpire"), "no latch to touch: a replay replicates a no-op write itself");
            if (way == Way.WAIT) {
                long blockFirst = block(sent.get(0));
                long blockAgain = block(sent.get(1));
                assertTrue(blockAgain > 0 && blockAgain <= blockFirst, "the resend waits what is left: " + sent);
            } else if (way == Way.FOREVER) {
                assertEquals(0L, block(sent.get(1)), "lock() resends BLOCK 0");
            } else {
                assertEquals(-1L, block(sent.get(1)), "a try resends no BLOCK");
            }
            if (session && swallow) {
                // The muted connection stays open until the client's pool closes it; a session hold
                // the server granted on it ends then.
                await("the muted connection's session hold ends", 5_000,
                        () -> "1".equals(server.call("HGET", name, field(kind, owner))));
            }
            assertEquals("1", server.call("HGET", name, field(kind, owner)), name + ": exactly one hold");
            assertEquals(kind.equals("read") || kind.equals("write") ? 2L : 1L, server.call("HLEN", name), name + ": nobody else's");
            assertEquals(1, thread.submit(lock::getHoldCount).get());
            if (kind.equals("fenced")) {
                // A session's resend was a new acquisition, with the next token; the first grant's
                // hold ended with its connection.
                long token = session ? 2L : 1L;
                assertEquals(token, thread.submit(lock::getToken).get(), name + ": the grant's token: " + sent);
            }
            thread.submit(() -> {
                lock.unlock();
                return null;
            }).get(10, TimeUnit.SECONDS);
            assertEquals(0L, server.call("EXISTS", name), name + ": free after one release");
            if (kind.equals("fenced")) {
                assertEquals(List.of(-1L, session ? 3L : 2L), server.call("LOCK.ACQUIRE", name, "x:1", "1000", "FENCED"),
                        "the next token: a replay took none");
                assertEquals(1L, server.call("LOCK.UNLOCK", name, "x:1"));
            }
        } finally {
            thread.shutdownNow();
        }
    }

    private static void await(String what, long ms, java.util.function.BooleanSupplier condition) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(ms);
        while (!condition.getAsBoolean()) {
            assertTrue(System.nanoTime() < deadline, "timed out waiting for " + what);
            Thread.sleep(5);
        }
    }

    private static long block(List<String> command) {
        return option(command, "BLOCK");
    }

    /** The number after {@code name}, -1 when the command has no such option. */
    private static long option(List<String> command, String name) {
        int at = command.indexOf(name);
        return at < 0 ? -1 : Long.parseLong(command.get(at + 1));
    }

    @Test
    void everyKindCountsOnceAfterALostReply() throws Exception {
        for (String kind : List.of("plain", "fenced", "nonreentrant", "read", "write", "fair")) {
            // The fair lock has no session holds.
            for (boolean session : kind.equals("fair") ? List.of(false) : List.of(false, true)) {
                for (Way way : Way.values()) {
                    lostReply(kind, session, way, false);
                }
            }
        }
    }

    @Test
    void eachAcquisitionCarriesTheCountBeforeItInTheSameCommand() throws Exception {
        try (Client on = Client.create(proxied)) {
            PlainLock lock = new PlainLock(on, "idem:count");
            int before = proxy.seen().size();
            server.call("CONFIG", "RESETSTAT");
            assertTrue(lock.tryLock());
            assertTrue(lock.tryLock(1, TimeUnit.SECONDS));
            List<List<String>> sent = proxy.seen().subList(before, proxy.seen().size());
            assertEquals(2, sent.size());
            assertEquals(0L, option(sent.get(0), "HELD"), "none held before: " + sent);
            assertEquals(1L, option(sent.get(1), "HELD"), "a re-entry: one held before: " + sent);
            assertEquals(2, server.calls("lock.acquire"));
            assertEquals(0, server.calls("get") + server.calls("del") + server.calls("exists") + server.calls("pexpire"),
                    "no round trip but the acquisition's");
            lock.unlock();
            lock.unlock();
            assertEquals(2, server.calls("lock.unlock"));
            assertEquals(0, server.calls("del"), "a release is one command");
            assertEquals(List.of(), server.call("KEYS", "redisson_*latch*"), "no latch written");
            assertEquals(0L, server.call("EXISTS", "idem:count"));
        }
    }

    /**
     * Two lock objects of one name used by one thread are one owner, counted together: the second
     * object's acquisition is a re-entry ({@code HELD 1}), its release leaves the first's hold, and
     * the first's frees the lock. For each kind, the fair lock sharing the plain lock's field.
     */
    @Test
    void twoObjectsOfOneOwnerCountTogether() throws Exception {
        for (String kind : List.of("plain", "read", "write", "fair", "fair+plain")) {
            String name = "idem:shared:" + kind;
            try (Client on = Client.create(proxied)) {
                DistributedLock a = lock(on, kind.equals("fair+plain") ? "fair" : kind, name, false);
                DistributedLock b = lock(on, kind.equals("fair+plain") ? "plain" : kind, name, false);
                String field = field(kind, a.getOwner());
                int before = proxy.seen().size();
                assertTrue(a.tryLock(), name);
                assertTrue(b.tryLock(), name + ": a re-entry of the same owner");
                List<List<String>> sent = proxy.seen().subList(before, proxy.seen().size());
                assertEquals(0L, option(sent.get(0), "HELD"), name + ": " + sent);
                assertEquals(1L, option(sent.get(1), "HELD"), name + ": the other object's hold counts: " + sent);
                assertEquals("2", server.call("HGET", name, field), name);
                b.unlock();
                assertEquals("1", server.call("HGET", name, field), name + ": the first object's hold stays");
                assertTrue(a.isHeldByCurrentThread(), name);
                a.unlock();
                assertEquals(0L, server.call("EXISTS", name), name + ": free");
                assertThrows(NotHeldException.class, b::unlock, name);
            }
        }
    }

    @Test
    void aReplyThatNeverComesTimesOutAndIsResent() throws Exception {
        for (String kind : List.of("plain", "read", "write", "fair")) {
            for (boolean session : kind.equals("fair") ? List.of(false) : List.of(false, true)) {
                lostReply(kind, session, Way.TRY, true);
            }
        }
    }
}
