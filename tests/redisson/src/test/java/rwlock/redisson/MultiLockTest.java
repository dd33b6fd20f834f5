package rwlock.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertInstanceOf;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.Map;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.redisson.api.RLock;

/**
 * RedissonMultiLock over three RLocks against one LOCK.ACQUIREALL /
 * LOCK.UNLOCKALL of the same three names.
 */
class MultiLockTest extends OneServer {
    private static final long LEASE = 10_000;

    private static List<String> names(String tag) {
        return List.of("{" + tag + "}:a", "{" + tag + "}:b", "{" + tag + "}:c");
    }

    private static String[] holds(String owner, List<String> names, String... options) {
        List<String> args = new ArrayList<>(List.of(owner));
        args.addAll(List.of(options));
        args.add("HOLDS");
        args.add(String.valueOf(names.size()));
        for (String n : names) {
            args.add("LOCK");
            args.add(n);
        }
        return args.toArray(new String[0]);
    }

    private static RLock multi(List<String> names) {
        return redisson.getMultiLock(names.stream().map(redisson::getLock).toArray(RLock[]::new));
    }

    @Test
    void eachSideRefusesTheOthersMultiHold() throws Exception {
        List<String> names = names("m1");
        RLock multi = multi(names);
        String owner = Env.moduleOwner(redisson);
        String me = redisson.getId() + ":" + Thread.currentThread().getId();
        // A wait above 0: Redisson 3.17's MultiLock.tryLock(0, lease) takes each lock with a
        // lease of 2 x waitTime = 0 and fails even when every lock is free. And a wait a loaded
        // machine meets: MultiLock takes the three locks one after another and gives up once the
        // wait is spent, free or not (a JIT-cold Redisson on a busy core spent 200 ms).
        assertTrue(multi.tryLock(5_000, LEASE, TimeUnit.MILLISECONDS), "MultiLock takes three free locks");
        Object refused = raw.call("LOCK.ACQUIREALL", holds(owner, names, String.valueOf(LEASE)));
        assertInstanceOf(Long.class, refused, "Redisson's MultiLock refuses LOCK.ACQUIREALL with a PTTL");
        for (String n : names) {
            assertEquals(Map.of(me, 1L), Module.holders(raw, n), "the refused multi-hold took nothing");
        }
        multi.unlock();

        assertNull(raw.call("LOCK.ACQUIREALL", holds(owner, names, String.valueOf(LEASE))));
        long t0 = System.nanoTime();
        assertFalse(multi.tryLock(200, LEASE, TimeUnit.MILLISECONDS), "the module's multi-hold refuses MultiLock");
        assertTrue(System.nanoTime() - t0 >= TimeUnit.MILLISECONDS.toNanos(190), "refused after its wait, not by an error");
        for (String n : names) {
            assertEquals(Map.of(owner, 1L), Module.holders(raw, n), "MultiLock's failed attempt left no hold");
            assertFalse(redisson.getLock(n).tryLock(0, LEASE, TimeUnit.MILLISECONDS));
        }
        assertEquals(List.of(1L, 1L, 1L), raw.call("LOCK.UNLOCKALL", holds(owner, names)));

        // One lock of the three held by a Redisson RLock: the module takes none of them.
        RLock b = redisson.getLock(names.get(1));
        b.lock(LEASE, TimeUnit.MILLISECONDS);
        assertInstanceOf(Long.class, raw.call("LOCK.ACQUIREALL", holds(owner, names, String.valueOf(LEASE))));
        assertEquals(Map.of(), Module.holders(raw, names.get(0)));
        assertEquals(Map.of(), Module.holders(raw, names.get(2)));
        b.unlock();
    }

    @Test
    void handoffBothWays() throws Exception {
        List<String> names = names("m2");
        RLock multi = multi(names);
        String owner = Env.moduleOwner(redisson);
        assertNull(raw.call("LOCK.ACQUIREALL", holds(owner, names, String.valueOf(LEASE))));
        try (Env.JavaThread javaThread = new Env.JavaThread(); Env.JavaThread moduleThread = new Env.JavaThread();
             Raw waiterConn = new Raw(server.port)) {
            Future<Long> redissonGot = javaThread.submit(() -> {
                assertTrue(multi.tryLock(5_000, LEASE, TimeUnit.MILLISECONDS));
                return System.nanoTime();
            });
            Env.await("MultiLock waiting", 5_000,
                    () -> Env.subscribers(raw, Env.derived("redisson_lock__channel", names.get(0))) > 0);
            long t0 = System.nanoTime();
            assertEquals(List.of(1L, 1L, 1L), raw.call("LOCK.UNLOCKALL", holds(owner, names)));
            double m2r = (redissonGot.get(6, TimeUnit.SECONDS) - t0) / 1e6;
            assertTrue(m2r < Env.HANDOFF_MS, "MultiLock woke " + m2r + " ms after LOCK.UNLOCKALL");

            Future<Object[]> moduleGot = moduleThread.submit(() -> {
                Object reply = waiterConn.callBlocking("LOCK.ACQUIREALL",
                        holds(owner, names, String.valueOf(LEASE), "BLOCK", "5000"));
                return new Object[] {reply, System.nanoTime()};
            });
            Env.await("module waiter blocked", 5_000, () -> Env.blockedClients(raw) > 0);
            long t1 = javaThread.run(() -> {
                long t = System.nanoTime();
                multi.unlock();
                return t;
            });
            Object[] got = moduleGot.get(6, TimeUnit.SECONDS);
            assertNull(got[0], "LOCK.ACQUIREALL takes all three once MultiLock released them");
            double r2m = ((Long) got[1] - t1) / 1e6;
            assertTrue(r2m < Env.HANDOFF_MS, "LOCK.ACQUIREALL served " + r2m + " ms after MultiLock.unlock");
            for (String n : names) {
                assertEquals(Map.of(owner, 1L), Module.holders(raw, n));
            }
            assertEquals(List.of(1L, 1L, 1L), raw.call("LOCK.UNLOCKALL", holds(owner, names)));
            Env.record("MultiLock handoff", String.format(Locale.ROOT,
                    "LOCK.UNLOCKALL -> MultiLock %.2f ms, MultiLock.unlock -> LOCK.ACQUIREALL %.2f ms", m2r, r2m));
        }
    }
}
