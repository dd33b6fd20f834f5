package io.github.rwlock.client;

import java.util.concurrent.CompletableFuture;

/** A waiter on a thread of its own, for the tests that interrupt or end a wait. */
final class Waiters {
    private Waiters() {
    }

    /**
     * Starts a thread that calls {@code lock.lockInterruptibly()}; {@code outcome} gets null when
     * it returned, else what it threw (an interrupt's {@link InterruptedException} among them).
     */
    static Thread lockInterruptibly(java.util.concurrent.locks.Lock lock, CompletableFuture<Throwable> outcome) {
        return start(lock::lockInterruptibly, outcome);
    }

    /** A wait that may throw (an interrupt's {@link InterruptedException} among them). */
    interface Wait {
        void run() throws Exception;
    }

    /** Starts a thread that runs {@code wait}; {@code outcome} gets null when it returned, else what it threw. */
    static Thread start(Wait wait, CompletableFuture<Throwable> outcome) {
        Thread thread = new Thread(() -> {
            try {
                wait.run();
                outcome.complete(null);
            } catch (Throwable e) {
                outcome.complete(e);
            }
        });
        thread.start();
        return thread;
    }
}
