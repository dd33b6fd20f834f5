package rwlock.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import org.junit.jupiter.api.Test;
import org.redisson.api.RCountDownLatch;

/**
 * Redisson's {@code RCountDownLatch} ({@code getCountDownLatch}) and the module's {@code LATCH.*}
 * on the same latches (issue 34, design §16): a count set by either side and counted down from
 * both, a waiter of each side woken at zero by the other side's last count-down, and counts,
 * deletes and new counts read alike.
 */
class CountDownLatchTest extends OneServer {
    /** Rounds timed in each direction. */
    private static final int ROUNDS = 20;
    /** A waiter's limit: far above a prompt wake-up, so waking by timeout would show. */
    private static final long WAIT = 10_000;

    private static String channel(String name) {
        return "redisson_countdownlatch__channel__{" + name + "}";
    }

    private static long count(String name) {
        return (Long) raw.call("LATCH.COUNT", name);
    }

    /** A count of 2 set by Redisson in even rounds and by the module in odd ones, the other refused. */
    private static void setTwo(RCountDownLatch latch, String name, int round) {
        if (round % 2 == 0) {
            assertTrue(latch.trySetCount(2));
            assertEquals(0L, raw.call("LATCH.TRYSETCOUNT", name, "5"), "Redisson's count refuses the module's");
        } else {
            assertEquals(1L, raw.call("LATCH.TRYSETCOUNT", name, "2"));
            assertFalse(latch.trySetCount(5), "the module's count refuses Redisson's");
        }
        assertEquals(2L, count(name));
        assertEquals(2, latch.getCount());
    }

    /**
     * Redisson's {@code await()} and {@code await(10 s)} (alternately) on a latch of 2, counted
     * down once by Redisson and last by {@code LATCH.COUNTDOWN}, whose {@code 0} on Redisson's
     * channel wakes the waiter.
     */
    @Test
    void aRedissonAwaitIsWokenByTheModulesLastCountDown() throws Exception {
        List<Double> samples = new ArrayList<>();
        try (Env.JavaThread waiter = new Env.JavaThread()) {
            for (int i = 0; i < ROUNDS; i++) {
                String name = "latch-m2r-" + i;
                RCountDownLatch latch = redisson.getCountDownLatch(name);
                setTwo(latch, name, i);
                latch.countDown();
                assertEquals(1L, count(name), "Redisson's count-down, read by the module");
                boolean untimed = i % 4 < 2;
                Future<Long> opened = waiter.submit(() -> {
                    if (untimed) {
                        latch.await();
                    } else {
                        assertTrue(latch.await(WAIT, TimeUnit.MILLISECONDS));
                    }
                    return System.nanoTime();
                });
                Env.await("Redisson awaiting " + name, 5_000, () -> Env.subscribers(raw, channel(name)) > 0);
                assertFalse(opened.isDone(), "Redisson's await returned before the count reached 0");
                long t0 = System.nanoTime();
                assertNull(raw.call("LATCH.COUNTDOWN", name));
                double ms = (opened.get(WAIT, TimeUnit.MILLISECONDS) - t0) / 1e6;
                assertTrue(ms < Env.HANDOFF_MS, "LATCH.COUNTDOWN woke Redisson's " + (untimed ? "await()" : "await(ms)")
                        + " after " + ms + " ms");
                samples.add(ms);
                assertEquals(0, latch.getCount());
                assertEquals(0L, raw.call("EXISTS", name), "a latch at 0 is deleted, as Redisson's script does");
            }
        }
        Env.record("latch: module's last LATCH.COUNTDOWN wakes Redisson's await", Env.summary(samples));
    }

    /**
     * A module client in {@code LATCH.AWAIT … BLOCK} on a latch of 2, counted down once by the
     * module and last by Redisson's {@code countDown()}, whose script the module hears through
     * its keyspace events.
     */
    @Test
    void aModuleAwaitIsWokenByRedissonsLastCountDown() throws Exception {
        List<Double> samples = new ArrayList<>();
        ExecutorService moduleThread = Executors.newSingleThreadExecutor();
        try (Raw waiterConn = new Raw(server.port)) {
            for (int i = 0; i < ROUNDS; i++) {
                String name = "latch-r2m-" + i;
                RCountDownLatch latch = redisson.getCountDownLatch(name);
                setTwo(latch, name, i);
                assertNull(raw.call("LATCH.COUNTDOWN", name));
                assertEquals(1, latch.getCount(), "the module's count-down, read by Redisson");
                assertEquals(0L, raw.call("LATCH.AWAIT", name), "not open yet");
                Future<Object[]> opened = moduleThread.submit(() -> {
                    Object reply = waiterConn.callBlocking("LATCH.AWAIT", name, "BLOCK", String.valueOf(WAIT));
                    return new Object[] {reply, System.nanoTime()};
                });
                Env.await("module waiter parked on " + name, 5_000, () -> Env.blockedClients(raw) == 1);
                long t0 = System.nanoTime();
                latch.countDown();
                Object[] got = opened.get(WAIT, TimeUnit.MILLISECONDS);
                assertEquals(1L, got[0], "the module's wait ends open");
                double ms = ((Long) got[1] - t0) / 1e6;
                assertTrue(ms < Env.HANDOFF_MS, "Redisson's countDown woke LATCH.AWAIT after " + ms + " ms");
                samples.add(ms);
                assertEquals(0L, count(name));
                assertEquals(0L, raw.call("EXISTS", name));
            }
        } finally {
            moduleThread.shutdownNow();
        }
        Env.record("latch: Redisson's last countDown wakes the module's LATCH.AWAIT BLOCK", Env.summary(samples));
    }

    /**
     * Deletes from each side read alike, a new count may follow a delete or a count reaching 0 on
     * either side, a count-down of no latch leaves none, and a module waiter is woken by
     * Redisson's {@code delete()}.
     */
    @Test
    void deletesAndNewCountsReadAlike() throws Exception {
        String name = "latch-shared";
        RCountDownLatch latch = redisson.getCountDownLatch(name);
        assertEquals(0, latch.getCount());
        assertEquals(0L, count(name));
        assertEquals(1L, raw.call("LATCH.AWAIT", name), "no latch: open");
        latch.countDown();
        assertNull(raw.call("LATCH.COUNTDOWN", name));
        assertEquals(0L, raw.call("EXISTS", name), "a count-down of no latch leaves none on either side");

        assertTrue(latch.trySetCount(3));
        assertEquals(1L, raw.call("LATCH.DELETE", name), "the module deletes Redisson's latch");
        assertEquals(0, latch.getCount());
        assertFalse(latch.delete(), "nothing left for Redisson to delete");
        assertEquals(1L, raw.call("LATCH.TRYSETCOUNT", name, "4"), "a new count after the delete");
        assertEquals(4, latch.getCount());
        assertTrue(latch.delete(), "Redisson deletes the module's latch");
        assertEquals(0L, count(name));
        assertEquals(0L, raw.call("LATCH.DELETE", name));
        assertTrue(latch.trySetCount(1), "a new count after Redisson's delete");
        latch.countDown();
        assertEquals(1L, raw.call("LATCH.TRYSETCOUNT", name, "2"), "a new count after Redisson's count reached 0");
        assertNull(raw.call("LATCH.COUNTDOWN", name));
        assertNull(raw.call("LATCH.COUNTDOWN", name));
        assertTrue(latch.trySetCount(2), "a new count after the module's count reached 0");
        assertEquals(2L, count(name));

        ExecutorService moduleThread = Executors.newSingleThreadExecutor();
        try (Raw waiterConn = new Raw(server.port)) {
            Future<Object[]> opened = moduleThread.submit(() -> {
                Object reply = waiterConn.callBlocking("LATCH.AWAIT", name, "BLOCK", String.valueOf(WAIT));
                return new Object[] {reply, System.nanoTime()};
            });
            Env.await("module waiter parked on " + name, 5_000, () -> Env.blockedClients(raw) == 1);
            long t0 = System.nanoTime();
            assertTrue(latch.delete());
            Object[] got = opened.get(WAIT, TimeUnit.MILLISECONDS);
            assertEquals(1L, got[0], "a deleted latch is open to the module's waiter");
            double ms = ((Long) got[1] - t0) / 1e6;
            assertTrue(ms < Env.HANDOFF_MS, "Redisson's delete woke LATCH.AWAIT after " + ms + " ms");
        } finally {
            moduleThread.shutdownNow();
        }
        assertEquals(0L, raw.call("EXISTS", name));
    }
}
