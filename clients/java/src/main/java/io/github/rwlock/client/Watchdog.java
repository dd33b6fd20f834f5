package io.github.rwlock.client;

import java.util.concurrent.ScheduledExecutorService;
import java.util.concurrent.ScheduledFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;

/**
 * Redisson's lock watchdog for one hold: on the client's shared scheduler, renews the lease every
 * third of it until stopped. A renewal replying that the owner no longer holds it, or none
 * succeeding for a whole lease (the server unreachable), reports the loss once and stops.
 */
final class Watchdog {
    private final long leaseMs;
    private final BooleanSupplier renew;
    private final Runnable onLost;
    private volatile boolean stopped;
    private volatile ScheduledFuture<?> task;
    private long lastRenewal = System.nanoTime();

    Watchdog(long leaseMs, BooleanSupplier renew, Runnable onLost) {
        this.leaseMs = leaseMs;
        this.renew = renew;
        this.onLost = onLost;
    }

    void start(ScheduledExecutorService scheduler) {
        long period = Math.max(1, leaseMs / 3);
        task = scheduler.scheduleWithFixedDelay(this::tick, period, period, TimeUnit.MILLISECONDS);
    }

    private void tick() {
        if (stopped) {
            return;
        }
        boolean held;
        try {
            held = renew.getAsBoolean();
        } catch (RuntimeException e) {
            // The connection: try again next time, while the lease may still run.
            if (TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - lastRenewal) < leaseMs) {
                return;
            }
            held = false;
        }
        if (stopped) {
            return;
        }
        if (!held) {
            stop();
            onLost.run();
            return;
        }
        lastRenewal = System.nanoTime();
    }

    void stop() {
        stopped = true;
        ScheduledFuture<?> current = task;
        if (current != null) {
            current.cancel(false);
        }
    }
}
