package io.github.rwlock.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import redis.clients.jedis.JedisPooled;

/**
 * A release's reply lost for real ({@link FaultProxy} closes the connection instead of passing it
 * on) and the release resent once with its request id. No release deletes its own unlock latch in
 * its pipeline, so every resend is answered from it: a re-entered hold's leaves the owner one
 * level, the last one's is released once, and a hold gone before its release is not held. The
 * last release's latch is left to the owner's next release or its TTL.
 */
class IdempotentReleaseTest extends ServerTest {
    private DistributedLock lock(Client on, String kind, String name) {
        return switch (kind) {
            case "plain" -> new PlainLock(on, name);
            case "read" -> new DistributedReadWriteLock(on, name).readLock();
            case "write" -> new DistributedReadWriteLock(on, name).writeLock();
            case "fair" -> new FairLock(on, name);
            default -> throw new IllegalArgumentException(kind);
        };
    }

    private static String release(String kind) {
        return switch (kind) {
            case "read", "write" -> "RWLOCK.UNLOCK";
            case "fair" -> "FAIRLOCK.UNLOCK";
            default -> "LOCK.UNLOCK";
        };
    }

    /** The hash field counting the owner's holds of this kind. */
    private static String field(String kind, String owner) {
        return kind.equals("write") ? owner + ":write" : owner;
    }

    /**
     * {@code lose}: the release command itself (its reply lost; the {@code DEL} behind it may or
     * may not have run when the proxy closes the connection) or {@code DEL} (the pipeline's last
     * reply lost: both commands ran, the case a resend must not release again).
     */
    private void reenteredThenLast(String kind, String lose) throws Exception {
        String unlock = release(kind);
        String name = "release:" + kind + ":" + lose;
        try (FaultProxy proxy = new FaultProxy(server.hostAndPort(), Set.of(lose.equals("DEL") ? "DEL" : unlock));
                JedisPooled proxied = new JedisPooled(proxy.hostAndPort());
                Client on = Client.create(proxied)) {
            DistributedLock lock = lock(on, kind, name);
            String owner = lock.getOwner();
            assertTrue(lock.tryLock(), name);
            assertTrue(lock.tryLock(), name + ": re-entered");
            assertEquals("2", server.call("HGET", name, field(kind, owner)), name);
            String calls = unlock.toLowerCase(Locale.ROOT);

            server.call("CONFIG", "RESETSTAT");
            proxy.arm();
            lock.unlock();
            assertTrue(proxy.dropped(), name + ": the proxy lost the first release's reply");
            assertEquals(2, server.calls(calls), name + ": the release and its resend");
            assertEquals("1", server.call("HGET", name, field(kind, owner)),
                    name + ": the resend was answered from its latch, one level still held");
            assertEquals(1, lock.getHoldCount(), name);
            String latches = "redisson_unlock_latch:{" + name + "}:*";
            assertEquals(1, ((List<?>) server.call("KEYS", latches)).size(),
                    name + ": the re-entered release's latch outlives its reply");

            server.call("CONFIG", "RESETSTAT");
            proxy.arm();
            lock.unlock(); // the last: released, as its latch answers the resend
            assertTrue(proxy.dropped(), name + ": the proxy lost the last release's reply");
            assertEquals(2, server.calls(calls), name + ": the last release and its resend");
            assertEquals(0, lock.getHoldCount(), name);
            assertEquals(0L, server.call("EXISTS", name), name + ": free");
            List<?> left = (List<?>) server.call("KEYS", "*{" + name + "}*");
            assertEquals(1, left.size(), name + ": only the last release's latch is left: " + left);
            String latch = (String) left.get(0);
            assertTrue(latch.startsWith("redisson_unlock_latch:"), name + ": " + latch);
            long ttl = (Long) server.call("PTTL", latch);
            assertTrue(ttl > 0 && ttl <= Plan.LATCH_TTL_MS, name + ": it expires on its own: " + ttl);

            assertTrue(lock.tryLock(), name + ": a second cycle on the same lock object");
            lock.unlock();
            assertEquals(0L, server.call("EXISTS", latch), name + ": the next release deleted it");
            assertEquals(1, ((List<?>) server.call("KEYS", "*{" + name + "}*")).size(),
                    name + ": that release's own is left");
        }
    }

    @Test
    void aResentReleaseOfAReenteredHoldFreesOneLevelOnly() throws Exception {
        for (String kind : List.of("plain", "read", "write", "fair")) {
            for (String lose : List.of("DEL", "release")) {
                reenteredThenLast(kind, lose);
            }
        }
    }

    /**
     * A hold gone before its release (its key deleted behind the owner's back, and then maybe
     * another owner's grant; a lease, so that no watchdog notices first) and the release's reply
     * lost: the resend is answered "not held" as the first send was, and the owner is told so, not
     * that it released. Every kind with the key merely gone too: its unlock then replies nil and
     * stores no latch (Redisson's read-write and fair scripts latch 1 there).
     */
    @Test
    void aResentLastReleaseOfAHoldGoneBeforeItIsNotHeld() throws Exception {
        for (String kind : List.of("plain", "read", "write", "fair")) {
            for (boolean taken : List.of(false, true)) {
                goneThenLost(kind, taken);
            }
        }
    }

    private void goneThenLost(String kind, boolean taken) throws Exception {
        String unlock = release(kind);
        String name = "gone:" + kind + ":" + taken;
        try (FaultProxy proxy = new FaultProxy(server.hostAndPort(), Set.of(unlock));
                JedisPooled proxied = new JedisPooled(proxy.hostAndPort());
                Client on = Client.create(proxied)) {
            DistributedLock lock = lock(on, kind, name);
            assertTrue(lock.tryLock(0, 60, TimeUnit.SECONDS), name);
            assertEquals(1L, server.call("DEL", name), name + ": the hold is gone");
            DistributedLock other = lock(client, kind, name);
            if (taken) {
                assertTrue(other.tryLock(0, 60, TimeUnit.SECONDS), name + ": another owner's grant");
            }
            assertEquals(1, lock.getHoldCount(), name + ": this process does not know it yet");

            server.call("CONFIG", "RESETSTAT");
            proxy.arm();
            assertThrows(NotHeldException.class, lock::unlock, name);
            assertTrue(proxy.dropped(), name + ": the proxy lost the release's reply");
            assertEquals(2, server.calls(unlock.toLowerCase(Locale.ROOT)), name + ": the release and its resend");
            assertEquals(0, lock.getHoldCount(), name);
            if (taken) {
                assertEquals(1L, server.call("EXISTS", name), name + ": the other owner's hold stands");
                other.unlock();
            }
            assertEquals(0L, server.call("EXISTS", name), name);
        }
    }
}
