package io.github.rwlock.client;

import java.util.ArrayList;
import java.util.List;

/**
 * Redisson's {@code RedissonMultiLock}, done by the server: the holds of several locks (plain,
 * read, write) for one owner, taken together by one {@code LOCK.ACQUIREALL} or not at all, while
 * waiting on the server ({@code BLOCK}), so two multi-locks over the same locks in any order never
 * deadlock. Renewed ({@code LOCK.RENEWALL}) and released ({@code LOCK.UNLOCKALL}) together too:
 * the watchdog reports the multi-lock lost when any hold is gone, and {@link #unlock()} frees
 * every hold still held, then throws {@link NotHeldException} if one was not.
 *
 * <p>In a cluster every name must be in one hash slot: give them one {@code {tag}}.
 *
 * <pre>{@code
 * MultiLock both = new MultiLock(client, List.of(Hold.lock("{acct}:1"), Hold.write("{acct}:2")));
 * }</pre>
 */
public final class MultiLock extends DistributedLock {
    /**
     * A multi-lock over {@code holds}.
     *
     * @param client the client
     * @param holds at least one; each name once
     */
    public MultiLock(Client client, List<Hold> holds) {
        this(client, holds, LockOptions.defaults());
    }

    /**
     * A multi-lock over {@code holds} with options (session, loss listener; never fenced or
     * non-reentrant).
     *
     * @param client the client
     * @param holds at least one; each name once
     * @param options how it takes its holds
     */
    public MultiLock(Client client, List<Hold> holds, LockOptions options) {
        super(client, Plan.multi(holds), check(options));
    }

    private static LockOptions check(LockOptions options) {
        if (options.fenced() || !options.reentrant()) {
            throw new IllegalArgumentException("a MultiLock takes no fencing tokens and is always re-entrant");
        }
        return options;
    }

    /**
     * A multi-lock over the holds of lock objects: each one's kind and name (a fenced or
     * non-reentrant {@link PlainLock} is held here as a plain one).
     *
     * @param client the client
     * @param locks {@link PlainLock}s and read-write lock sides
     * @return the multi-lock
     */
    public static MultiLock of(Client client, DistributedLock... locks) {
        List<Hold> holds = new ArrayList<>();
        for (DistributedLock lock : locks) {
            holds.add(lock.asHold());
        }
        return new MultiLock(client, holds);
    }

    /**
     * What this multi-lock holds.
     *
     * @return its holds, in order
     */
    public List<Hold> getHolds() {
        return plan.holds;
    }
}
