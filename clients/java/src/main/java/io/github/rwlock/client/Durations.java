package io.github.rwlock.client;

import java.time.Duration;
import java.util.Objects;
import java.util.concurrent.TimeUnit;

/**
 * The waits and leases callers give, checked and turned into the module's milliseconds: one rule
 * for the lock objects and {@link RedLock}, which shares nothing else with them.
 */
final class Durations {
    private Durations() {}

    /** A wait in whole ms: 0 tries once, anything shorter than 1 ms but above 0 waits 1 ms. */
    static long waitMs(long wait, TimeUnit unit) {
        Objects.requireNonNull(unit, "unit");
        if (wait < 0) {
            throw new IllegalArgumentException("a wait cannot be negative: " + wait + " " + unit);
        }
        return wait == 0 ? 0 : Math.max(1, unit.toMillis(wait));
    }

    /** {@link #waitMs(long, TimeUnit)} of a {@code Duration}. */
    static long waitMs(Duration wait) {
        if (wait.isNegative()) {
            throw new IllegalArgumentException("a wait cannot be negative: " + wait);
        }
        return wait.isZero() ? 0 : Math.max(1, wait.toMillis());
    }

    /** A lease in whole ms, at least 1: the module takes no empty lease. */
    static long leaseMs(long lease, TimeUnit unit) {
        Objects.requireNonNull(unit, "unit");
        if (lease <= 0) {
            throw new IllegalArgumentException("a lease must be positive: " + lease + " " + unit);
        }
        return Math.max(1, unit.toMillis(lease));
    }

    /** {@link #leaseMs(long, TimeUnit)} of a {@code Duration}. */
    static long leaseMs(Duration lease) {
        if (lease.isNegative() || lease.isZero()) {
            throw new IllegalArgumentException("a lease must be positive: " + lease);
        }
        return Math.max(1, lease.toMillis());
    }
}
