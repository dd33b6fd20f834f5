package rwlock.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.Locale;
import java.util.concurrent.Callable;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.ThreadLocalRandom;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicLong;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.Test;
import org.redisson.api.RLock;
import org.redisson.api.RedissonClient;

/**
 * Redisson threads and module clients on a few locks for several seconds.
 * Inside every critical section the holder takes a guard key with SET NX: a
 * second holder at the same time finds it taken (a violation). Every wait
 * must end with the lock, well before the waiter's limit: a waiter left
 * waiting past the holder's lease would show as a timeout.
 */
class ContentionTest {
    private static final int LOCKS = 3;
    private static final int REDISSON_THREADS = 3;
    private static final int MODULE_CLIENTS = 3;
    private static final long RUN_MS = 5_000;
    /** A holder's lease; holds last about a millisecond. */
    private static final long LEASE = 2_000;
    /** A waiter's limit: several leases, so a timeout means a lost wake-up. */
    private static final long WAIT = 3 * LEASE;

    private static Servers.Server server;
    private static RedissonClient redisson;

    private final AtomicLong violations = new AtomicLong();
    private final AtomicLong lost = new AtomicLong();
    private final AtomicLong timeouts = new AtomicLong();
    private final AtomicLong maxWaitMicros = new AtomicLong();

    @BeforeAll
    static void start() throws Exception {
        server = Servers.start(false);
        redisson = Env.redisson(server, 1_000);
    }

    @AfterAll
    static void stop() {
        if (redisson != null) {
            redisson.shutdown();
        }
        if (server != null) {
            server.close();
        }
    }

    private static String lock(int i) {
        return "contended-" + i;
    }

    /** The critical section: the guard must be free, ours throughout, then freed. */
    private void critical(Raw guard, String lock, String me) {
        String key = "guard:{" + lock + "}";
        if (!"OK".equals(guard.call("SET", key, me, "NX", "PX", String.valueOf(LEASE)))) {
            violations.incrementAndGet();
            return;
        }
        guard.call("INCR", "count:{" + lock + "}");
        if (!me.equals(guard.call("GET", key))) {
            violations.incrementAndGet();
        }
        guard.call("DEL", key);
    }

    private void waited(long startNanos) {
        long micros = (System.nanoTime() - startNanos) / 1_000;
        maxWaitMicros.accumulateAndGet(micros, Math::max);
    }

    @Test
    void noTwoHoldersAtOnceAndEveryWaiterServed() throws Exception {
        long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(RUN_MS);
        ExecutorService pool = Executors.newFixedThreadPool(REDISSON_THREADS + MODULE_CLIENTS);
        List<Future<Long>> redissonCounts = new ArrayList<>();
        List<Future<Long>> moduleCounts = new ArrayList<>();
        for (int t = 0; t < REDISSON_THREADS; t++) {
            redissonCounts.add(pool.submit(redissonWorker(end)));
        }
        for (int c = 0; c < MODULE_CLIENTS; c++) {
            moduleCounts.add(pool.submit(moduleWorker(end)));
        }
        long byRedisson = 0;
        long byModule = 0;
        for (Future<Long> f : redissonCounts) {
            byRedisson += f.get(RUN_MS + 3 * WAIT, TimeUnit.MILLISECONDS);
        }
        for (Future<Long> f : moduleCounts) {
            byModule += f.get(RUN_MS + 3 * WAIT, TimeUnit.MILLISECONDS);
        }
        pool.shutdownNow();
        long counted = 0;
        try (Raw raw = new Raw(server.port)) {
            for (int i = 0; i < LOCKS; i++) {
                Object n = raw.call("GET", "count:{" + lock(i) + "}");
                counted += n == null ? 0 : Long.parseLong((String) n);
            }
        }
        Env.record("contention", String.format(Locale.ROOT,
                "%d s, %d locks, %d Redisson threads + %d module clients: %d critical sections"
                        + " (Redisson %d, module %d), violations %d, lost holds %d, timed-out waits %d,"
                        + " longest wait %.1f ms",
                RUN_MS / 1000, LOCKS, REDISSON_THREADS, MODULE_CLIENTS, byRedisson + byModule, byRedisson,
                byModule, violations.get(), lost.get(), timeouts.get(), maxWaitMicros.get() / 1000.0));
        assertEquals(0, violations.get(), "two holders in one critical section");
        assertEquals(0, lost.get(), "a holder's lock was gone at its unlock");
        assertEquals(0, timeouts.get(), "a waiter waited past the holders' leases");
        assertEquals(byRedisson + byModule, counted, "every critical section counted once");
        assertTrue(byRedisson > 0 && byModule > 0, "both sides took the locks");
    }

    private Callable<Long> redissonWorker(long end) {
        return () -> {
            long done = 0;
            String me = redisson.getId() + ":" + Thread.currentThread().getId();
            try (Raw guard = new Raw(server.port)) {
                while (System.nanoTime() < end) {
                    String name = lock(ThreadLocalRandom.current().nextInt(LOCKS));
                    RLock lock = redisson.getLock(name);
                    long start = System.nanoTime();
                    if (!lock.tryLock(WAIT, LEASE, TimeUnit.MILLISECONDS)) {
                        timeouts.incrementAndGet();
                        continue;
                    }
                    waited(start);
                    critical(guard, name, me);
                    try {
                        lock.unlock();
                    } catch (IllegalMonitorStateException gone) {
                        lost.incrementAndGet();
                    }
                    done++;
                }
            }
            return done;
        };
    }

    private Callable<Long> moduleWorker(long end) {
        return () -> {
            long done = 0;
            String me = Env.moduleOwner(redisson);
            try (Raw conn = new Raw(server.port); Raw guard = new Raw(server.port)) {
                while (System.nanoTime() < end) {
                    String name = lock(ThreadLocalRandom.current().nextInt(LOCKS));
                    long start = System.nanoTime();
                    Object reply = conn.callBlocking("LOCK.ACQUIRE", name, me, String.valueOf(LEASE),
                            "BLOCK", String.valueOf(WAIT));
                    if (reply != null) {
                        timeouts.incrementAndGet();
                        continue;
                    }
                    waited(start);
                    critical(guard, name, me);
                    if (!Long.valueOf(1).equals(conn.call("LOCK.UNLOCK", name, me))) {
                        lost.incrementAndGet();
                    }
                    done++;
                }
            }
            return done;
        };
    }
}
