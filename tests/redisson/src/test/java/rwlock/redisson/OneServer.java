package rwlock.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Map;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.Function;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;

/**
 * What most test classes share: one server with the module, a Redisson
 * client on it whose {@code lockWatchdogTimeout} is 1 s ({@code lock()}
 * without a lease takes 1 s, renewed every ~333 ms), and a raw connection
 * for the module's commands. Started before a class's tests and stopped by
 * its PID after them; Surefire runs the classes one after another.
 */
abstract class OneServer {
    /** The server with the module. */
    static Servers.Server server;
    /** Real Redisson on it. */
    static RedissonClient redisson;
    /** The module's commands, on a connection of their own. */
    static Raw raw;

    @BeforeAll
    static void start() throws Exception {
        server = Servers.start(false);
        redisson = Env.redisson(server, 1_000);
        raw = new Raw(server.port);
    }

    @AfterAll
    static void stop() {
        if (raw != null) {
            raw.close();
            raw = null;
        }
        if (redisson != null) {
            redisson.shutdown();
            redisson = null;
        }
        if (server != null) {
            server.close();
            server = null;
        }
    }

    /**
     * A lock kind as both sides take it: Redisson's lock of a name, the module's acquire and
     * unlock commands, and the module's view of the holders (owner → count).
     */
    record Kind(Function<String, RLock> redissonLock, String acquire, String unlock,
            Function<String, Map<String, Long>> holders) {}

    /** A step a test adds around each handoff, on the lock's name and the waiter's owner. */
    interface Step {
        void on(String name, String owner) throws Exception;
    }

    /**
     * Timed handoffs from a module holder to a Redisson thread waiting in {@code lock()}, on
     * {@code count} fresh names {@code prefix + i}: {@code waiting} returns once that thread waits
     * (given its owner), {@code after} checks what is left once it released. Returns the ms from
     * the module's unlock to Redisson's hold.
     */
    static List<Double> handoffsModuleToRedisson(Kind kind, String prefix, int count, long lease, Step waiting,
            Step after) throws Exception {
        List<Double> samples = new ArrayList<>();
        String owner = Env.moduleOwner(redisson);
        try (Env.JavaThread waiter = new Env.JavaThread()) {
            String redissonOwner = redisson.getId() + ":" + waiter.run(() -> Thread.currentThread().getId());
            for (int i = 0; i < count; i++) {
                String name = prefix + i;
                RLock lock = kind.redissonLock().apply(name);
                assertNull(raw.call(kind.acquire(), name, owner, String.valueOf(lease)));
                Future<Long> acquired = waiter.submit(() -> {
                    lock.lock(lease, TimeUnit.MILLISECONDS);
                    return System.nanoTime();
                });
                waiting.on(name, redissonOwner);
                long t0 = System.nanoTime();
                assertEquals(1L, raw.call(kind.unlock(), name, owner));
                samples.add((acquired.get(lease / 2, TimeUnit.MILLISECONDS) - t0) / 1e6);
                assertTrue(waiter.run(lock::isHeldByCurrentThread));
                waiter.run(() -> {
                    lock.unlock();
                    return null;
                });
                after.on(name, redissonOwner);
            }
        }
        return samples;
    }

    /**
     * Timed handoffs from a Redisson holder to a module client parked with {@code BLOCK}, on
     * {@code count} fresh names {@code prefix + i}: {@code parked} returns once the module client
     * waits (given its owner), {@code after} checks what is left once it released. Returns the ms
     * from Redisson's unlock to the module client's reply.
     */
    static List<Double> handoffsRedissonToModule(Kind kind, String prefix, int count, long lease, Step parked,
            Step after) throws Exception {
        List<Double> samples = new ArrayList<>();
        String owner = Env.moduleOwner(redisson);
        ExecutorService moduleThread = Executors.newSingleThreadExecutor();
        try (Env.JavaThread holder = new Env.JavaThread(); Raw waiterConn = new Raw(server.port)) {
            for (int i = 0; i < count; i++) {
                String name = prefix + i;
                RLock lock = kind.redissonLock().apply(name);
                holder.run(() -> {
                    lock.lock(lease, TimeUnit.MILLISECONDS);
                    return null;
                });
                Future<Object[]> acquired = moduleThread.submit(() -> {
                    Object reply = waiterConn.callBlocking(kind.acquire(), name, owner, String.valueOf(lease), "BLOCK",
                            "5000");
                    return new Object[] {reply, System.nanoTime()};
                });
                parked.on(name, owner);
                long t0 = holder.run(() -> {
                    long t = System.nanoTime();
                    lock.unlock();
                    return t;
                });
                Object[] got = acquired.get(lease / 2, TimeUnit.MILLISECONDS);
                assertNull(got[0], "the module waiter takes the lock Redisson released");
                samples.add(((Long) got[1] - t0) / 1e6);
                assertEquals(Map.of(owner, 1L), kind.holders().apply(name));
                assertEquals(1L, raw.call(kind.unlock(), name, owner));
                after.on(name, owner);
            }
        } finally {
            moduleThread.shutdownNow();
        }
        return samples;
    }
}
