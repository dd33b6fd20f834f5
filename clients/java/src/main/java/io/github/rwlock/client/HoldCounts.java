package io.github.rwlock.client;

import java.util.concurrent.ConcurrentHashMap;

/**
 * How many holds each owner has of each lock name and kind, as the lock's hash on the server
 * counts them (the field {@code <owner>} of a plain, fair or read hold, {@code <owner>:write} of a
 * write hold): what an acquisition or a release sends as {@code HELD n}, "the owner held n before
 * this call", which makes its resend after a lost reply idempotent. Shared by every lock object of
 * one {@link Client}, since two objects of one name used by one thread are one owner, counted in
 * one field. An entry goes when its count reaches 0, so owners (threads) gone for good leave
 * nothing here. Thread-safe.
 */
final class HoldCounts {
    /**
     * One owner's holds of one kind of one lock name; the fair lock counts as {@link
     * HoldKind#LOCK}, the field it shares with the plain lock.
     */
    record Key(String name, String owner, HoldKind kind) {}

    private final ConcurrentHashMap<Key, Integer> counts = new ConcurrentHashMap<>();

    /** The count of {@code key}, 0 when the owner holds none. */
    int get(Key key) {
        return counts.getOrDefault(key, 0);
    }

    /** Adds {@code delta} (negative: takes away) to the count of {@code key}, at least 0. */
    void add(Key key, int delta) {
        counts.compute(key, (k, count) -> {
            int now = (count == null ? 0 : count) + delta;
            return now > 0 ? now : null;
        });
    }

    /** Forgets the count of {@code key}: the server holds none of it for the owner. */
    void clear(Key key) {
        counts.remove(key);
    }
}
