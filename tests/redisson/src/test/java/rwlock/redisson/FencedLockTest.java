package rwlock.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNotNull;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;

/**
 * RFencedLock (Redisson 3.19+) and {@code LOCK.ACQUIRE … FENCED}: one token
 * counter, strictly increasing in acquisition order whichever side acquires.
 * RFencedLock is reached by reflection, so that the project still compiles
 * against versions without it.
 */
class FencedLockTest extends OneServer {
    private static final long LEASE = 10_000;

    /** RFencedLock's method {@code name} with these parameter types. */
    private static Object call(Object lock, String name, Class<?>[] types, Object... args) throws Exception {
        Method m = Class.forName("org.redisson.api.RFencedLock").getMethod(name, types);
        try {
            return m.invoke(lock, args);
        } catch (InvocationTargetException e) {
            throw e.getCause() instanceof Exception ? (Exception) e.getCause() : e;
        }
    }

    private static Object fencedLock(String name) throws Exception {
        return RedissonClient.class.getMethod("getFencedLock", String.class).invoke(redisson, name);
    }

    private static final Class<?>[] WAIT_LEASE = {long.class, long.class, TimeUnit.class};

    @Test
    void tokensStrictlyIncreaseAcrossBothSides() throws Exception {
        Env.requireVersion(Env.FENCED_SINCE, "RFencedLock");
        String name = "fenced-order";
        Object fenced = fencedLock(name);
        RLock asLock = (RLock) fenced;
        String owner = Env.moduleOwner(redisson);
        List<Long> tokens = new ArrayList<>();
        for (int round = 0; round < 10; round++) {
            Long token = (Long) call(fenced, "tryLockAndGetToken", WAIT_LEASE, 0L, LEASE, TimeUnit.MILLISECONDS);
            assertNotNull(token, "Redisson acquires a free fenced lock");
            tokens.add(token);
            assertEquals(token, call(fenced, "getToken", new Class<?>[0]));
            // While Redisson holds: the module's fenced attempt is [pttl, -1], the token untouched.
            List<?> refused = (List<?>) raw.call("LOCK.ACQUIRE", name, owner, "5000", "FENCED");
            assertTrue((Long) refused.get(0) > 0);
            assertEquals(-1L, refused.get(1));
            assertEquals(String.valueOf(token), raw.call("GET", "redisson_lock_token:{" + name + "}"));
            if (round % 3 == 0) {
                // A Redisson re-entry takes a new token too.
                Long again = (Long) call(fenced, "tryLockAndGetToken", WAIT_LEASE, 0L, LEASE, TimeUnit.MILLISECONDS);
                tokens.add(again);
                asLock.unlock();
            }
            asLock.unlock();

            List<?> taken = (List<?>) raw.call("LOCK.ACQUIRE", name, owner, String.valueOf(LEASE), "FENCED");
            assertEquals(-1L, taken.get(0));
            tokens.add((Long) taken.get(1));
            if (round % 3 == 1) {
                List<?> reentry = (List<?>) raw.call("LOCK.ACQUIRE", name, owner, String.valueOf(LEASE), "FENCED");
                tokens.add((Long) reentry.get(1));
                assertEquals(0L, raw.call("LOCK.UNLOCK", name, owner));
            }
            // While the module holds: Redisson's attempt fails and takes no token.
            assertNull(call(fenced, "tryLockAndGetToken", WAIT_LEASE, 0L, LEASE, TimeUnit.MILLISECONDS));
            assertEquals(1L, raw.call("LOCK.UNLOCK", name, owner));
        }
        for (int i = 1; i < tokens.size(); i++) {
            assertEquals(tokens.get(i - 1) + 1, tokens.get(i), "tokens in acquisition order: " + tokens);
        }
        Env.record("RFencedLock tokens", tokens.size() + " acquisitions alternating sides, tokens "
                + tokens.get(0) + ".." + tokens.get(tokens.size() - 1) + " strictly increasing");
    }

    @Test
    void aWaitingFencedLockGetsTheNextTokenOnTheModulesRelease() throws Exception {
        Env.requireVersion(Env.FENCED_SINCE, "RFencedLock");
        String name = "fenced-handoff";
        Object fenced = fencedLock(name);
        String owner = Env.moduleOwner(redisson);
        List<?> taken = (List<?>) raw.call("LOCK.ACQUIRE", name, owner, String.valueOf(LEASE), "FENCED");
        long moduleToken = (Long) taken.get(1);
        ExecutorService javaThread = Executors.newSingleThreadExecutor();
        try {
            Future<Long> redissonToken = javaThread.submit(() -> {
                Long t = (Long) call(fenced, "lockAndGetToken", new Class<?>[] {long.class, TimeUnit.class},
                        LEASE, TimeUnit.MILLISECONDS);
                ((RLock) fenced).unlock();
                return t;
            });
            Env.await("Redisson waiting", 5_000,
                    () -> Env.subscribers(raw, "redisson_lock__channel:{" + name + "}") > 0);
            // lockAndGetToken waits through a listener it adds after subscribing; before 3.28.0 a
            // message arriving in between was lost and the waiter slept for the whole TTL
            // (Redisson #5761, with its own scripts too). Release once it is surely listening.
            Thread.sleep(50);
            long t0 = System.nanoTime();
            assertEquals(1L, raw.call("LOCK.UNLOCK", name, owner));
            long token = redissonToken.get(5, TimeUnit.SECONDS);
            assertTrue((System.nanoTime() - t0) / 1e6 < Env.HANDOFF_MS, "woken by the message, not the TTL");
            assertEquals(moduleToken + 1, token);
        } finally {
            javaThread.shutdownNow();
        }
        // And the module's BLOCK waiter behind a Redisson holder gets the next token.
        RLock asLock = (RLock) fenced;
        Long held = (Long) call(fenced, "lockAndGetToken", new Class<?>[] {long.class, TimeUnit.class},
                LEASE, TimeUnit.MILLISECONDS);
        ExecutorService moduleThread = Executors.newSingleThreadExecutor();
        try (Raw waiterConn = new Raw(server.port)) {
            Future<Object> waited = moduleThread.submit(() ->
                    waiterConn.callBlocking("LOCK.ACQUIRE", name, owner, String.valueOf(LEASE), "BLOCK", "5000", "FENCED"));
            Env.await("module waiter blocked", 5_000, () -> Env.blockedClients(raw) > 0);
            asLock.unlock();
            Object reply = waited.get(5, TimeUnit.SECONDS);
            assertInstanceOf(List.class, reply);
            assertEquals(List.of(-1L, held + 1), reply);
            assertEquals(1L, raw.call("LOCK.UNLOCK", name, owner));
        } finally {
            moduleThread.shutdownNow();
        }
    }
}
