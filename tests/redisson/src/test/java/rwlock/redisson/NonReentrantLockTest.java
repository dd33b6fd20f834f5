package rwlock.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertThrows;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.Map;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;
import redis.clients.jedis.exceptions.JedisDataException;

/**
 * Redisson's non-reentrant lock ({@code getNonReentrantLock}, 4.4+; the first
 * on Maven Central is 4.6.1) and {@code LOCK.ACQUIRE … NOREENTRY}.
 */
class NonReentrantLockTest extends OneServer {
    private static final long LEASE = 10_000;

    private static RLock nonReentrant(String name) throws Exception {
        return (RLock) RedissonClient.class.getMethod("getNonReentrantLock", String.class).invoke(redisson, name);
    }

    @Test
    void bothSidesRefuseReentryAndEachOther() throws Exception {
        Env.requireVersion(Env.NONREENTRANT_SINCE, "non-reentrant lock");
        String name = "noreentry";
        RLock lock = nonReentrant(name);
        String me = redisson.getId() + ":" + Thread.currentThread().getId();
        lock.lock(LEASE, TimeUnit.MILLISECONDS);
        IllegalMonitorStateException again = assertThrows(IllegalMonitorStateException.class,
                () -> lock.tryLock(0, LEASE, TimeUnit.MILLISECONDS), "Redisson refuses its own re-entry");
        assertTrue(again.getMessage().contains("non-reentrant"), again.getMessage());
        assertEquals(Map.of(me, 1L), Module.holders(raw, name), "the refused re-entry changed nothing");
        String owner = Env.moduleOwner(redisson);
        assertInstanceOf(Long.class, raw.call("LOCK.ACQUIRE", name, owner, "5000", "NOREENTRY"),
                "a Redisson non-reentrant hold refuses the module with its PTTL");
        lock.unlock();

        assertNull(raw.call("LOCK.ACQUIRE", name, owner, String.valueOf(LEASE), "NOREENTRY"));
        JedisDataException error = assertThrows(JedisDataException.class,
                () -> raw.call("LOCK.ACQUIRE", name, owner, String.valueOf(LEASE), "NOREENTRY"));
        assertTrue(error.getMessage().startsWith("NON_REENTRANT_REACQUIRE"), error.getMessage());
        long t0 = System.nanoTime();
        assertThrows(JedisDataException.class,
                () -> raw.callBlocking("LOCK.ACQUIRE", name, owner, String.valueOf(LEASE), "BLOCK", "10000", "NOREENTRY"));
        // Refused at once, not after its 10 s wait; 3 s leave a loaded machine room.
        assertTrue((System.nanoTime() - t0) / 1e6 < Env.HANDOFF_MS, "the holder never waits for itself");
        assertEquals(Map.of(owner, 1L), Module.holders(raw, name));
        assertFalse(lock.tryLock(0, LEASE, TimeUnit.MILLISECONDS), "a module hold refuses Redisson");
        assertTrue(lock.isLocked());
        assertFalse(lock.isHeldByCurrentThread());
        assertEquals(1L, raw.call("LOCK.UNLOCK", name, owner));
        Env.record("non-reentrant", "Redisson: IllegalMonitorStateException (its script's ERR NON_REENTRANT_REACQUIRE);"
                + " module: " + error.getMessage());
    }

    @Test
    void handoffBothWays() throws Exception {
        Env.requireVersion(Env.NONREENTRANT_SINCE, "non-reentrant lock");
        String name = "noreentry-handoff";
        RLock lock = nonReentrant(name);
        String owner = Env.moduleOwner(redisson);
        assertNull(raw.call("LOCK.ACQUIRE", name, owner, String.valueOf(LEASE), "NOREENTRY"));
        try (Env.JavaThread javaThread = new Env.JavaThread(); Env.JavaThread moduleThread = new Env.JavaThread();
             Raw waiterConn = new Raw(server.port)) {
            Future<Long> redissonGot = javaThread.submit(() -> {
                lock.lock(LEASE, TimeUnit.MILLISECONDS);
                return System.nanoTime();
            });
            Env.await("Redisson waiting", 5_000,
                    () -> Env.subscribers(raw, "redisson_lock__channel:{" + name + "}") > 0);
            long t0 = System.nanoTime();
            assertEquals(1L, raw.call("LOCK.UNLOCK", name, owner));
            assertTrue((redissonGot.get(5, TimeUnit.SECONDS) - t0) / 1e6 < Env.HANDOFF_MS, "woken by the message, not the TTL");

            Future<Object> moduleGot = moduleThread.submit(() ->
                    waiterConn.callBlocking("LOCK.ACQUIRE", name, owner, String.valueOf(LEASE), "BLOCK", "5000", "NOREENTRY"));
            Env.await("module waiter blocked", 5_000, () -> Env.blockedClients(raw) > 0);
            javaThread.run(() -> {
                lock.unlock();
                return null;
            });
            assertNull(moduleGot.get(5, TimeUnit.SECONDS));
            assertEquals(1L, raw.call("LOCK.UNLOCK", name, owner));
        }
    }
}
