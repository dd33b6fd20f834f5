package io.github.rwlock.client;

import java.util.ArrayList;
import java.util.List;
import java.util.Objects;
import java.util.concurrent.TimeUnit;

/**
 * Redisson's {@code RCountDownLatch} on the module's {@code LATCH.*} commands, modelled on {@link
 * java.util.concurrent.CountDownLatch}: a count under one key, shared with Redisson's own latch of
 * that name, and a wait for it to reach zero. Unlike {@code CountDownLatch}, its count is set
 * after construction ({@link #trySetCount}), by whichever process comes first, and may be set
 * again once it reached zero (the key is gone then). Thread-safe.
 *
 * <pre>{@code
 * DistributedCountDownLatch done = new DistributedCountDownLatch(client, "batch:7:done");
 * done.trySetCount(3);                          // only if there is no latch yet
 * // ... three workers, anywhere, call done.countDown() ...
 * if (done.await(1, TimeUnit.MINUTES)) {        // waits on the server
 *     System.out.println("all three finished");
 * }
 * }</pre>
 *
 * <p><b>Waits</b> happen on the server ({@code LATCH.AWAIT name BLOCK ms}), every waiter answered
 * at the last count-down, by anyone, or when the latch is deleted; an interrupt ends the wait on
 * the server too. A wait's reply lost on the way is asked again, with what is left of the wait
 * (a wait changes nothing). A count-down's lost reply is thrown, never resent: {@code
 * LATCH.COUNTDOWN} has no request id, and a resend could count down twice.
 */
public final class DistributedCountDownLatch {
    private final String name;
    private final Exchange exchange;

    /**
     * The latch {@code name}.
     *
     * @param client the client
     * @param name the key of its count, as Redisson's {@code getCountDownLatch(name)}; no braces
     *     (the module refuses them: Redisson's channel name would put it in another hash slot)
     */
    public DistributedCountDownLatch(Client client, String name) {
        Objects.requireNonNull(client, "client");
        this.name = DistributedLock.checkName(name);
        this.exchange = new Exchange(client, name);
    }

    /**
     * The latch's name.
     *
     * @return the key of its count
     */
    public String getName() {
        return name;
    }

    /**
     * Sets the count if there is no latch (Redisson's {@code trySetCount}); a count of 0 is a latch
     * open already.
     *
     * @param count 0 or more
     * @return whether it was set (false: a latch exists)
     */
    public boolean trySetCount(long count) {
        if (count < 0) {
            throw new IllegalArgumentException("a count cannot be negative: " + count);
        }
        return Plan.integer(exchange.call(List.of("LATCH.TRYSETCOUNT", name, Long.toString(count)))) == 1;
    }

    /**
     * Counts down once; at zero the latch goes and every waiter is answered. Without a latch the
     * count becomes -1 and goes at once, as Redisson's script does.
     */
    public void countDown() {
        exchange.call(List.of("LATCH.COUNTDOWN", name));
    }

    /**
     * The count (Redisson's and {@code CountDownLatch}'s {@code getCount}).
     *
     * @return the count, 0 without a latch
     */
    public long getCount() {
        return Plan.integer(exchange.call(List.of("LATCH.COUNT", name)));
    }

    /**
     * Deletes the latch, answering every waiter (Redisson's {@code delete}).
     *
     * @return whether there was one
     */
    public boolean delete() {
        return Plan.integer(exchange.call(List.of("LATCH.DELETE", name))) == 1;
    }

    /**
     * Waits without limit, on the server, until the count reaches zero or the latch is deleted.
     *
     * @throws InterruptedException interrupted before or while waiting (the wait ended)
     */
    public void await() throws InterruptedException {
        reached(0);
    }

    /**
     * Waits up to {@code wait}, on the server, until the count reaches zero or the latch is
     * deleted.
     *
     * @param wait how long to wait; 0 looks once
     * @param unit its unit
     * @return whether it was reached (true at once without a latch)
     * @throws InterruptedException interrupted before or while waiting (the wait ended)
     */
    public boolean await(long wait, TimeUnit unit) throws InterruptedException {
        long waitMs = Durations.waitMs(wait, unit);
        return reached(waitMs == 0 ? Plan.NO_BLOCK : waitMs);
    }

    /** One {@code LATCH.AWAIT}: {@code blockMs} {@link Plan#NO_BLOCK} looks once, 0 waits without limit. */
    private boolean reached(long blockMs) throws InterruptedException {
        if (Thread.interrupted()) {
            throw new InterruptedException(name + ": interrupted before waiting");
        }
        try {
            return Plan.integer(exchange.await(block -> {
                List<String> args = new ArrayList<>(List.of("LATCH.AWAIT", name));
                Plan.addBlock(args, block);
                return args;
            }, blockMs, true)) == 1;
        } catch (Waiter.Cancelled cancelled) {
            throw new InterruptedException(name + ": interrupted while waiting; the wait was ended on the server");
        }
    }

    @Override
    public String toString() {
        return "DistributedCountDownLatch(" + name + ")";
    }
}
