package io.github.rwlock.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
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
 * on) and the release resent once, the same, with {@code HELD n} (the owner's count before it): a
 * re-entered hold's resend leaves the owner one level (the server finds {@code n - 1} and releases
 * nothing), and a last release's resend that finds nothing held throws {@link
 * ReleaseUnknownException}, whether the first send freed the lock or the hold was gone before it.
 * No latch is written.
 */
class IdempotentReleaseTest extends ServerTest {
    private static final List<String> KINDS = List.of("plain", "read", "write", "fair");

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

    /** The number after {@code HELD} in {@code command}. */
    private static String held(List<String> command) {
        int at = command.indexOf("HELD");
        assertTrue(at > 0 && command.size() > at + 1, "no HELD in " + command);
        return command.get(at + 1);
    }

    private void reenteredThenLast(String kind) throws Exception {
        String unlock = release(kind);
        String name = "release:" + kind;
        try (FaultProxy proxy = new FaultProxy(server.hostAndPort(), Set.of(unlock));
                JedisPooled proxied = new JedisPooled(proxy.hostAndPort());
                Client on = Client.create(proxied)) {
            DistributedLock lock = lock(on, kind, name);
            String owner = lock.getOwner();
            assertTrue(lock.tryLock(), name);
            assertTrue(lock.tryLock(), name + ": re-entered");
            assertEquals("2", server.call("HGET", name, field(kind, owner)), name);
            String calls = unlock.toLowerCase(Locale.ROOT);

            server.call("CONFIG", "RESETSTAT");
            int before = proxy.seen().size();
            proxy.arm();
            lock.unlock(); // released: the resend found one level gone and released nothing
            assertTrue(proxy.dropped(), name + ": the proxy lost the first release's reply");
            assertEquals(2, server.calls(calls), name + ": the release and its resend");
            List<List<String>> sent = proxy.seen().subList(before, proxy.seen().size());
            assertEquals(List.of("2", "2"), sent.stream().map(IdempotentReleaseTest::held).toList(),
                    name + ": both say the owner held 2: " + sent);
            assertEquals("1", server.call("HGET", name, field(kind, owner)), name + ": one level still held");
            assertEquals(1, lock.getHoldCount(), name);
            assertEquals(0, server.calls("del"), name + ": a release is one command");

            server.call("CONFIG", "RESETSTAT");
            before = proxy.seen().size();
            proxy.arm();
            // The first send freed it; the resend cannot tell that from a hold gone before it.
            assertThrows(ReleaseUnknownException.class, lock::unlock, name);
            assertTrue(proxy.dropped(), name + ": the proxy lost the last release's reply");
            assertEquals(2, server.calls(calls), name + ": the last release and its resend");
            sent = proxy.seen().subList(before, proxy.seen().size());
            assertEquals(2, sent.size(), name + ": " + sent);
            assertTrue(sent.stream().noneMatch(c -> c.contains("HELD")),
                    name + ": a last release is never replayed, and sends no HELD 1: " + sent);
            assertEquals(0, lock.getHoldCount(), name);
            assertFalse(lock.isHeldByCurrentThread(), name);
            assertEquals(0L, server.call("EXISTS", name), name + ": free");
            assertEquals(List.of(), server.call("KEYS", "*{" + name + "}*"), name + ": no latch written");

            assertTrue(lock.tryLock(), name + ": a second cycle on the same lock object starts from 0");
            assertEquals("1", server.call("HGET", name, field(kind, owner)), name);
            lock.unlock();
            assertEquals(0L, server.call("EXISTS", name), name);
        }
    }

    @Test
    void aResentReleaseOfAReenteredHoldFreesOneLevelOnly() throws Exception {
        for (String kind : KINDS) {
            reenteredThenLast(kind);
        }
    }

    /**
     * A hold gone before its release (its key deleted behind the owner's back, and then maybe
     * another owner's grant; a lease, so that no watchdog notices first) and the release's reply
     * lost: the resend finds nothing held, as the first send did, and the owner is told that the
     * release's outcome is unknown (it cannot be told from a release that freed the lock), never
     * that it released. Every kind with the key merely gone too: its unlock then replies nil.
     */
    @Test
    void aResentLastReleaseOfAHoldGoneBeforeItIsUnknown() throws Exception {
        for (String kind : KINDS) {
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
            assertThrows(ReleaseUnknownException.class, lock::unlock, name);
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

    /**
     * Without a lost reply a release of a hold gone before it is {@link NotHeldException}, its
     * first send's nil being certain; and a re-entered hold's resend that finds nothing held is
     * {@link NotHeldException} too (the first send cannot have freed it: the owner held two).
     */
    @Test
    void aReenteredHoldGoneBeforeItsLostReleaseIsNotHeld() throws Exception {
        String name = "gone:reentered";
        try (FaultProxy proxy = new FaultProxy(server.hostAndPort(), Set.of("LOCK.UNLOCK"));
                JedisPooled proxied = new JedisPooled(proxy.hostAndPort());
                Client on = Client.create(proxied)) {
            PlainLock lock = new PlainLock(on, name);
            assertTrue(lock.tryLock(0, 60, TimeUnit.SECONDS));
            assertTrue(lock.tryLock(0, 60, TimeUnit.SECONDS));
            assertEquals(1L, server.call("DEL", name), "the holds are gone");
            proxy.arm();
            assertThrows(NotHeldException.class, lock::unlock);
            assertTrue(proxy.dropped(), "the proxy lost the release's reply");
            assertEquals(0, lock.getHoldCount());

            assertTrue(lock.tryLock(0, 60, TimeUnit.SECONDS), "counting starts from 0 again");
            assertEquals("1", server.call("HGET", name, lock.getOwner()));
            assertEquals(1L, server.call("DEL", name));
            assertThrows(NotHeldException.class, lock::unlock, "no lost reply: the nil is certain");
        }
    }
}
