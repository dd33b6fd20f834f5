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

/**
 * A contention run shared by the semaphore kinds' tests (SemaphoreTest,
 * PermitExpirableSemaphoreTest): workers of every side take and give back
 * permits of one semaphore for a while, each section checked by a guard
 * counter on the server, each wait timed against its limit.
 */
final class Contention {
    private Contention() {
    }

    /** The guard shared by every side: more permits held at once than the semaphore has is a violation. */
    static final class Guard {
        final int permits;
        final AtomicLong violations = new AtomicLong();
        final AtomicLong mostHeld = new AtomicLong();

        Guard(int permits) {
            this.permits = permits;
        }

        /**
         * The section: the guard counts the permits held now (INCRBY on entry, DECRBY on leaving);
         * above the semaphore's permits, more holders than permits were inside at once.
         */
        void section(Raw conn, String name, int held) {
            String key = "guard:{" + name + "}";
            long inside = (Long) conn.call("INCRBY", key, String.valueOf(held));
            mostHeld.accumulateAndGet(inside, Math::max);
            if (inside > permits) {
                violations.incrementAndGet();
            }
            conn.call("INCR", "sections:{" + name + "}");
            conn.call("DECRBY", key, String.valueOf(held));
        }
    }

    /**
     * One worker's way to take and give back permits, on connections of its own. A taker may keep
     * what its last acquisition gave (a permit-expirable semaphore's ids) for its release.
     */
    interface Taker extends AutoCloseable {
        boolean acquire(int permits, long waitMs) throws Exception;

        void release(int permits) throws Exception;

        /** Closes the worker's own connections; Redisson's workers share its client and have none. */
        @Override
        default void close() {
        }
    }

    /** A side of the contention run: its workers' takers, the most permits a section takes, and its figures. */
    static final class Side {
        final String what;
        final int workers;
        final int mostPerSection;
        final Callable<Taker> open;
        final AtomicLong sections = new AtomicLong();
        final AtomicLong timeouts = new AtomicLong();
        final AtomicLong maxWaitMicros = new AtomicLong();

        /** A side whose sections take 1 or 2 permits. */
        Side(String what, int workers, Callable<Taker> open) {
            this(what, workers, 2, open);
        }

        Side(String what, int workers, int mostPerSection, Callable<Taker> open) {
            this.what = what;
            this.workers = workers;
            this.mostPerSection = mostPerSection;
            this.open = open;
        }

        int somePermits() {
            return 1 + ThreadLocalRandom.current().nextInt(mostPerSection);
        }

        String figures() {
            return String.format(Locale.ROOT,
                    "%s: %d workers, sections of 1-%d permits, %d sections, longest wait %.1f ms, %d timed out", what,
                    workers, mostPerSection, sections.get(), maxWaitMicros.get() / 1000.0, timeouts.get());
        }
    }

    /**
     * Runs {@code sides} on semaphore {@code name} (its permits already set) for {@code runMs}, each
     * wait limited to {@code waitMs}; records the figures under {@code label} and asserts no
     * violation, no wait near its limit (a lost wake-up), every side served and every section
     * counted once. The caller checks the permits are all back.
     */
    static void contend(Servers.Server server, Raw raw, String label, String name, int permits, long runMs,
            long waitMs, List<Side> sides) throws Exception {
        Guard guard = new Guard(permits);
        long end = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(runMs);
        ExecutorService pool = Executors.newCachedThreadPool();
        try {
            List<Future<?>> workers = new ArrayList<>();
            for (Side side : sides) {
                for (int w = 0; w < side.workers; w++) {
                    workers.add(pool.submit(worker(server, name, end, waitMs, side, guard)));
                }
            }
            for (Future<?> worker : workers) {
                worker.get(runMs + 3 * waitMs, TimeUnit.MILLISECONDS);
            }
            long sections = 0;
            List<String> figures = new ArrayList<>();
            for (Side side : sides) {
                sections += side.sections.get();
                figures.add(side.figures());
            }
            Env.record(label, String.format(Locale.ROOT,
                    "%d s, %d permits: %d sections, violations %d, most permits held at once"
                            + " %d; %s", runMs / 1000, permits, sections, guard.violations.get(), guard.mostHeld.get(),
                    String.join("; ", figures)));
            assertEquals(0, guard.violations.get(), "more permits held than the semaphore has");
            for (Side side : sides) {
                assertEquals(0, side.timeouts.get(), side.what + ": a waiter was not served within " + waitMs + " ms");
                assertTrue(side.maxWaitMicros.get() / 1000 < waitMs / 2, side.what + ": the longest wait, "
                        + side.maxWaitMicros.get() / 1000 + " ms, was near its limit: a lost wake-up");
                assertTrue(side.sections.get() > 0, side.what + " held permits");
            }
            assertEquals(String.valueOf(sections), raw.call("GET", "sections:{" + name + "}"),
                    "every section counted once");
            assertEquals("0", raw.call("GET", "guard:{" + name + "}"));
        } finally {
            pool.shutdownNow();
        }
    }

    private static Callable<Void> worker(Servers.Server server, String name, long end, long waitMs, Side side,
            Guard guard) {
        return () -> {
            try (Taker taker = side.open.call(); Raw guardConn = new Raw(server.port)) {
                while (System.nanoTime() < end) {
                    int permits = side.somePermits();
                    long start = System.nanoTime();
                    if (!taker.acquire(permits, waitMs)) {
                        side.timeouts.incrementAndGet();
                        continue;
                    }
                    side.maxWaitMicros.accumulateAndGet((System.nanoTime() - start) / 1_000, Math::max);
                    guard.section(guardConn, name, permits);
                    taker.release(permits);
                    side.sections.incrementAndGet();
                }
            }
            return null;
        };
    }
}
