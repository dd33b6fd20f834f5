package io.github.rwlock.client;

import java.util.List;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.TimeoutException;
import java.util.function.Supplier;

/**
 * An interruptible wait on the server. A thread blocked reading a socket does not see {@link
 * Thread#interrupt()}, so the command is sent and its reply read on one of the client's wait
 * threads while the calling thread waits for it, interruptibly. An interrupt then ends the
 * server-side wait from another connection to the same server with {@code CLIENT KILL ID} (the id
 * comes from {@code CLIENT ID}, sent in the same write as the command); when the pool has followed
 * Sentinel to another master since, by closing the waiting connection's socket instead.
 *
 * <p>Why a kill rather than {@code CLIENT UNBLOCK}, which ends a module wait too (answered as
 * the wait's timeout): the thread blocked reading the reply must be freed in any case, and closing
 * the connection does both at once; the module drops the waiter in its disconnect callback, and
 * the pool destroys the broken connection.
 */
final class Waiter {
    private Waiter() {}

    /** The wait was interrupted and ended; {@code reply} is what came if it was served meanwhile. */
    static final class Cancelled extends Exception {
        private static final long serialVersionUID = 1L;

        /** Whether a reply came (the server served the wait before it was ended). */
        final boolean replied;

        /** That reply. */
        final transient Object reply;

        Cancelled(boolean replied, Object reply) {
            super("interrupted", null, false, false);
            this.replied = replied;
            this.reply = reply;
        }
    }

    /**
     * Carries a wait ended by an interrupt (after its clean-up) out of an acquisition as an
     * unchecked error, up to {@link #interruptibly}: the acquisition's uninterruptible callers never
     * see one.
     */
    static final class Ended extends RuntimeException {
        private static final long serialVersionUID = 1L;

        Ended(String name) {
            super(name + ": interrupted while waiting; the wait was ended on the server", null, false, false);
        }
    }

    /**
     * Runs an interruptible acquisition of {@code name}: {@link InterruptedException} when the
     * thread was interrupted before it (nothing sent) or its wait was {@link Ended}.
     */
    static <T> T interruptibly(String name, Supplier<T> acquisition) throws InterruptedException {
        if (Thread.interrupted()) {
            throw new InterruptedException(name + ": interrupted before acquiring");
        }
        try {
            return acquisition.get();
        } catch (Ended e) {
            throw new InterruptedException(e.getMessage());
        }
    }

    /**
     * {@code link.pipeline(commands, timeoutMs)}, ended by an interrupt of the calling thread; a
     * {@link Cancelled}'s reply is the first command's.
     */
    static List<Object> call(ExecutorService executor, Connector connector, Link link, List<List<String>> commands,
            long timeoutMs) throws Cancelled {
        CompletableFuture<Long> id = new CompletableFuture<>();
        Future<List<Object>> reply = executor.submit(() -> link.pipeline(commands, timeoutMs, id::complete));
        try {
            return reply.get();
        } catch (ExecutionException e) {
            throw rethrow(e);
        } catch (InterruptedException e) {
            end(connector, link, id, reply);
            try {
                return throwCancelled(uninterruptibly(reply));
            } catch (ExecutionException failed) {
                // The killed connection's read failed: nothing came.
                throw new Cancelled(false, null);
            }
        }
    }

    private static List<Object> throwCancelled(List<Object> replies) throws Cancelled {
        throw new Cancelled(true, replies.get(0));
    }

    /** Kills the waiting connection once its id is known, unless the call ended first. */
    private static void end(Connector connector, Link link, CompletableFuture<Long> id, Future<List<Object>> reply) {
        while (!reply.isDone()) {
            Long clientId;
            try {
                clientId = id.get(10, TimeUnit.MILLISECONDS);
            } catch (TimeoutException e) {
                continue;
            } catch (InterruptedException e) {
                continue; // already ending the wait
            } catch (ExecutionException e) {
                return;
            }
            Link other = connector.beside(link);
            if (other == null) {
                // The pool has followed a failover: an id sent to the new master would name one
                // of its own connections. Closing the socket ends the wait on the old one.
                link.abort();
                return;
            }
            try {
                other.call(List.of("CLIENT", "KILL", "ID", Long.toString(clientId)), Link.DEFAULT);
            } finally {
                other.close();
            }
            return;
        }
    }

    private static <T> T uninterruptibly(Future<T> future) throws ExecutionException {
        boolean interrupted = false;
        try {
            while (true) {
                try {
                    return future.get();
                } catch (InterruptedException e) {
                    interrupted = true;
                }
            }
        } finally {
            if (interrupted) {
                Thread.currentThread().interrupt();
            }
        }
    }

    private static RuntimeException rethrow(ExecutionException e) {
        Throwable cause = e.getCause();
        if (cause instanceof RuntimeException runtime) {
            return runtime;
        }
        if (cause instanceof Error error) {
            throw error;
        }
        return new IllegalStateException(cause);
    }
}
