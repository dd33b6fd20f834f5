package rwlock.redisson;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertNull;
import static org.junit.jupiter.api.Assertions.assertTrue;

import io.github.rwlock.client.DistributedCountDownLatch;
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

    /** What one side does to a latch: set a count (whether it was set), count down, read the count. */
    private record Side(String what, TrySet trySet, Step countDown, Read count) {}

    private interface TrySet {
        boolean apply(String name, long count) throws Exception;
    }

    private interface Step {
        void apply(String name) throws Exception;
    }

    private interface Read {
        long apply(String name) throws Exception;
    }

    private static List<Side> everySide(OurClient ours) {
        return List.of(
                new Side("Redisson", (name, n) -> redisson.getCountDownLatch(name).trySetCount(n),
                        name -> redisson.getCountDownLatch(name).countDown(),
                        name -> redisson.getCountDownLatch(name).getCount()),
                new Side("module", (name, n) -> Long.valueOf(1).equals(raw.call("LATCH.TRYSETCOUNT", name, String.valueOf(n))),
                        name -> assertNull(raw.call("LATCH.COUNTDOWN", name)),
                        CountDownLatchTest::count),
                new Side("our Java client", (name, n) -> new DistributedCountDownLatch(ours.client, name).trySetCount(n),
                        name -> new DistributedCountDownLatch(ours.client, name).countDown(),
                        name -> new DistributedCountDownLatch(ours.client, name).getCount()));
    }

    /**
     * Redisson, the module and our Java client ({@code DistributedCountDownLatch}) on one latch of
     * 3, for each pair of the side that sets the count (the two others refused) and the side that
     * counts down last: each side counts down once, every side reads each count, and a waiter of
     * each side (Redisson's {@code await()}, {@code LATCH.AWAIT … BLOCK}, our client's {@code
     * await(10 s)}, which waits on the server) is woken by the last count-down.
     */
    @Test
    void everySideSetsCountsDownAndAwaitsOneLatch() throws Exception {
        List<Double> samples = new ArrayList<>();
        ExecutorService waiters = Executors.newFixedThreadPool(3);
        try (OurClient ours = new OurClient(server); Raw waiterConn = new Raw(server.port)) {
            List<Side> sides = everySide(ours);
            for (int setter = 0; setter < sides.size(); setter++) {
                for (int last = 0; last < sides.size(); last++) {
                    String name = "latch-all-" + setter + "-" + last;
                    for (int s = 0; s < sides.size(); s++) {
                        assertEquals(s == 0, sides.get((setter + s) % sides.size()).trySet().apply(name, 3),
                                "only the first try-set sets the count");
                    }
                    List<Future<Long>> opened = List.of(
                            waiters.submit(() -> {
                                redisson.getCountDownLatch(name).await();
                                return System.nanoTime();
                            }),
                            waiters.submit(() -> {
                                assertEquals(1L, waiterConn.callBlocking("LATCH.AWAIT", name, "BLOCK", String.valueOf(WAIT)));
                                return System.nanoTime();
                            }),
                            waiters.submit(() -> {
                                assertTrue(new DistributedCountDownLatch(ours.client, name).await(WAIT, TimeUnit.MILLISECONDS));
                                return System.nanoTime();
                            }));
                    Env.await("a waiter of every side on " + name, 5_000,
                            () -> Env.subscribers(raw, channel(name)) > 0 && Env.blockedClients(raw) == 2);
                    long left = 3;
                    for (int s = 1; s <= sides.size(); s++) {
                        Side side = sides.get((last + s) % sides.size());
                        for (Future<Long> waiter : opened) {
                            assertFalse(waiter.isDone(), "a wait ended before the count reached 0");
                        }
                        long t0 = System.nanoTime();
                        side.countDown().apply(name);
                        left--;
                        for (Side reader : sides) {
                            assertEquals(left, reader.count().apply(name), reader.what() + " reads the count after "
                                    + side.what() + "'s count-down");
                        }
                        if (left > 0) {
                            continue;
                        }
                        for (Future<Long> waiter : opened) {
                            double ms = (waiter.get(WAIT, TimeUnit.MILLISECONDS) - t0) / 1e6;
                            assertTrue(ms < Env.HANDOFF_MS, side.what() + "'s last count-down woke a waiter after "
                                    + ms + " ms");
                            samples.add(ms);
                        }
                    }
                    assertEquals(0L, raw.call("EXISTS", name));
                }
            }
            DistributedCountDownLatch ourLatch = new DistributedCountDownLatch(ours.client, "latch-all-delete");
            assertTrue(ourLatch.trySetCount(2));
            assertEquals(2, redisson.getCountDownLatch("latch-all-delete").getCount());
            assertTrue(ourLatch.delete(), "our client deletes the latch");
            assertFalse(redisson.getCountDownLatch("latch-all-delete").delete(), "nothing left for Redisson");
            assertEquals(0L, count("latch-all-delete"));
        } finally {
            waiters.shutdownNow();
        }
        Env.record("latch: Redisson, module and our Java client set, count down and await one latch (9 rounds);"
                + " every side's waiter woken by any side's last count-down", Env.summary(samples));
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
