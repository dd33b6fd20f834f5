package io.github.rwlock.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.List;
import java.util.Locale;
import java.util.Set;
import org.junit.jupiter.api.Test;
import redis.clients.jedis.JedisPooled;

/**
 * A release's reply lost for real ({@link FaultProxy} closes the connection instead of passing it
 * on) and the release resent once with its request id. A re-entered hold's release keeps its own
 * unlock latch in its pipeline, so the resend is answered from it and the owner still holds one
 * level; the owner's last release deletes its latches in its pipeline, so its resend finds the
 * hold gone, which counts as released (the first send released it), and nothing is left.
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
            assertEquals(1, ((List<?>) server.call("KEYS", "redisson_unlock_latch:*")).size(),
                    name + ": the re-entered release's latch outlives its reply");

            server.call("CONFIG", "RESETSTAT");
            proxy.arm();
            lock.unlock(); // the last: no NotHeldException although the resend may find nothing held
            assertTrue(proxy.dropped(), name + ": the proxy lost the last release's reply");
            assertEquals(2, server.calls(calls), name + ": the last release and its resend");
            assertEquals(0, lock.getHoldCount(), name);
            assertEquals(0L, server.call("EXISTS", name), name + ": free");
            assertEquals(List.of(), server.call("KEYS", "*"), name + ": no latch left");
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
}
