package io.github.rwlock.client;

import java.util.ArrayList;
import java.util.List;
import java.util.concurrent.TimeUnit;

/**
 * The request latches of one semaphore object whose replies came, kept for the {@code DEL}
 * pipelined with its next release ({@link Exchange#release}): the server would drop them on its
 * own only when they expire. A latch past its expiry is dropped unsent. Thread-safe.
 */
final class Latches {
    /** A latch and when it expires on the server ({@link System#nanoTime()}). */
    private record Latch(String key, long expiresNanos) {}

    private final List<Latch> latches = new ArrayList<>();

    /** Keeps {@code key}, which the server keeps {@code ttlMs} from now. */
    synchronized void keep(String key, long ttlMs) {
        long now = System.nanoTime();
        latches.removeIf(l -> now - l.expiresNanos() > 0);
        latches.add(new Latch(key, now + TimeUnit.MILLISECONDS.toNanos(ttlMs)));
    }

    /** The latches still alive, for one {@code DEL}; forgotten here. */
    synchronized List<String> take() {
        long now = System.nanoTime();
        List<String> keys = new ArrayList<>();
        for (Latch latch : latches) {
            if (now - latch.expiresNanos() <= 0) {
                keys.add(latch.key());
            }
        }
        latches.clear();
        return keys;
    }
}
