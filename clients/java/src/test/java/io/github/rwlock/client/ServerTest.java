package io.github.rwlock.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertFalse;
import static org.junit.jupiter.api.Assertions.assertTrue;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.Callable;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.function.BiFunction;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.AfterEach;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.BeforeEach;
import org.junit.jupiter.api.TestInstance;
import redis.clients.jedis.JedisPooled;

/**
 * What a test class against one server shares: the server with the module (started before the
 * class's tests, stopped by its PID after them), a pooled connection to it, and a fresh {@link
 * Client} on an emptied server (statistics reset) for every test.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
abstract class ServerTest {
    /** The server with the module. */
    RedisServer server;
    /** A pool on it, the client's. */
    JedisPooled jedis;
    /** This test's client: its own UUID. */
    Client client;

    @BeforeAll
    void start() {
        server = new RedisServer();
        jedis = server.pooled();
    }

    @AfterAll
    void stop() {
        if (jedis != null) {
            jedis.close();
        }
        if (server != null) {
            server.close();
        }
    }

    @BeforeEach
    void empty() {
        server.call("FLUSHALL");
        server.call("CONFIG", "RESETSTAT");
        client = Client.create(jedis);
    }

    @AfterEach
    void closeClient() {
        client.close();
    }

    /** The server's parked waiters: {@code LOCK.WAITING}'s entries, and the clients Redis sees blocked. */
    boolean nothingWaits() {
        return ((List<?>) server.call("LOCK.WAITING")).isEmpty() && blocked() == 0;
    }

    /** The clients Redis sees blocked. */
    long blocked() {
        return Long.parseLong(server.info("clients", "blocked_clients"));
    }

    /**
     * Runs {@code wait} on a thread of its own until the server parks it, interrupts that thread,
     * and checks that it threw {@link InterruptedException} and that the server dropped the waiter.
     */
    void interruptEndsTheWait(Waiters.Wait wait) throws Exception {
        CompletableFuture<Throwable> outcome = new CompletableFuture<>();
        Thread waiter = Waiters.start(wait, outcome);
        RedisServer.waitUntil("the wait is parked on the server", 10_000, () -> blocked() == 1);
        waiter.interrupt();
        Throwable thrown = outcome.get(30, TimeUnit.SECONDS);
        assertTrue(thrown instanceof InterruptedException, "interrupted: " + thrown);
        RedisServer.waitUntil("the server dropped the waiter", 10_000, this::nothingWaits);
    }

    /**
     * {@code refused} is a wait of 300 ms that runs out (it returns whether it was refused): it must
     * have waited and left nothing parked; then {@code forever}, a wait without limit, is ended by
     * an interrupt ({@link #interruptEndsTheWait}).
     */
    void aWaitRunsOutAndAnInterruptEndsAnother(Callable<Boolean> refused, Waiters.Wait forever) throws Exception {
        long start = System.nanoTime();
        assertTrue(refused.call(), "nothing free: the wait runs out");
        assertTrue(TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start) >= 250, "it waited");
        assertTrue(nothingWaits(), "a wait that ran out leaves the queue");
        interruptEndsTheWait(forever);
    }

    /**
     * {@code wait} through {@code proxy}, armed to hold back the next reply, parks on the server;
     * {@code serve} frees what it waits for, the server serves it (checked by {@code granted}), the
     * reply never comes, and then the waiting thread is interrupted: it must throw {@link
     * InterruptedException}.
     */
    void anInterruptAfterAnUnheardGrant(FaultProxy proxy, Waiters.Wait wait, Runnable serve, Runnable granted)
            throws Exception {
        proxy.armSwallow();
        CompletableFuture<Throwable> outcome = new CompletableFuture<>();
        Thread waiter = Waiters.start(wait, outcome);
        RedisServer.waitUntil("the acquisition waits on the server", 10_000, () -> blocked() == 1);
        serve.run();
        RedisServer.waitUntil("the server served it", 10_000, this::nothingWaits);
        granted.run();
        assertFalse(outcome.isDone(), "the reply was held back");
        waiter.interrupt();
        Throwable thrown = outcome.get(30, TimeUnit.SECONDS);
        assertTrue(thrown instanceof InterruptedException, "interrupted: " + thrown);
        assertTrue(proxy.dropped());
    }

    /** One contention worker's side: takes permits, saying how many, and gives them back. */
    interface Contender {
        int take() throws Exception;

        void giveBack() throws Exception;
    }

    /**
     * {@code workers} threads, each with a client of its own ({@code side} makes its {@link
     * Contender} from it and the worker's number), take and give back {@code rounds} times, holding
     * across a few other workers' turns; checks that all finished and that they overlapped.
     *
     * @return how many times more than {@code count} permits were held at once
     */
    int contend(int count, int workers, int rounds, BiFunction<Client, Integer, Contender> side) throws Exception {
        AtomicInteger inside = new AtomicInteger();
        AtomicInteger holders = new AtomicInteger();
        AtomicInteger most = new AtomicInteger();
        AtomicInteger violations = new AtomicInteger();
        AtomicInteger taken = new AtomicInteger();
        ExecutorService pool = Executors.newFixedThreadPool(workers);
        List<Future<?>> done = new ArrayList<>();
        try {
            for (int w = 0; w < workers; w++) {
                int worker = w;
                done.add(pool.submit(() -> {
                    try (Client own = Client.create(jedis)) {
                        Contender contender = side.apply(own, worker);
                        for (int r = 0; r < rounds; r++) {
                            int want = contender.take();
                            if (inside.addAndGet(want) > count) {
                                violations.incrementAndGet();
                            }
                            most.accumulateAndGet(holders.incrementAndGet(), Math::max);
                            taken.incrementAndGet();
                            Thread.sleep(1);
                            holders.decrementAndGet();
                            inside.addAndGet(-want);
                            contender.giveBack();
                        }
                    }
                    return null;
                }));
            }
            for (Future<?> worker : done) {
                worker.get(180, TimeUnit.SECONDS);
            }
        } finally {
            pool.shutdownNow();
        }
        assertEquals(workers * rounds, taken.get());
        assertTrue(most.get() >= 2, "the workers overlapped: at most " + most.get() + " holders at once");
        return violations.get();
    }
}
