package rwlock.redisson;

import java.io.IOException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.nio.file.StandardOpenOption;
import java.util.ArrayList;
import java.util.Collections;
import java.util.List;
import java.util.Locale;
import java.util.Set;
import java.util.UUID;
import java.util.concurrent.Callable;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import java.util.concurrent.Future;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import org.junit.jupiter.api.Assumptions;
import org.redisson.Redisson;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;

/**
 * What every test class shares: the Redisson version under test and what it
 * can do, Redisson clients, module-side owners, Java threads to hold
 * Redisson's per-thread locks, and the figures each run records.
 */
final class Env {
    /** The Redisson version Maven resolved (-Dredisson.version). */
    static final String VERSION = System.getProperty("redisson.version", "unknown");

    /** First version with the unlock latch (redisson_unlock_latch:{lock}:id). */
    static final String LATCH_SINCE = "3.24.0";
    /** First version with RFencedLock. */
    static final String FENCED_SINCE = "3.19.0";
    /** First version whose RLock uses sharded pub/sub in a Redis 7 cluster. */
    static final String SHARDED_SINCE = "3.22.0";
    /** First version with the non-reentrant lock (4.4.0; 4.6.1 is the first on Maven Central). */
    static final String NONREENTRANT_SINCE = "4.4.0";
    /** First version with RSemaphore.trySetPermits(permits, ttl) (CHANGELOG 3.29.0). */
    static final String SEMAPHORE_TTL_SINCE = "3.29.0";
    /** First version with RSemaphore.releaseIfExists (CHANGELOG 4.0.0). */
    static final String RELEASE_IF_EXISTS_SINCE = "4.0.0";
    /** First version with RPermitExpirableSemaphore.getPermits, acquiredPermits and setPermits (CHANGELOG 3.19.1). */
    static final String PERMIT_COUNTS_SINCE = "3.19.1";
    /** First version with RPermitExpirableSemaphore's methods of n permits (CHANGELOG 3.23.4). */
    static final String PERMIT_MANY_SINCE = "3.23.4";
    /** First version with RPermitExpirableSemaphore.getLeaseTime (CHANGELOG 3.41.0). */
    static final String PERMIT_LEASE_TIME_SINCE = "3.41.0";

    /**
     * First version whose read-lock watchdog renews only its own read leases;
     * before it, it renews every reader's (the module's RWLOCK.RENEW renews
     * only the caller's, as 4.4+ does).
     */
    static final String READ_RENEW_OWN_SINCE = "4.4.0";

    /**
     * Redisson 3.52.0 to 4.2.0 delete the wrong key after an unlock (the
     * latch named by the instance id, not the request id), so their unlock
     * latches stay until their TTL; 4.3.0 fixed it.
     */
    static boolean leavesUnlockLatch() {
        return atLeast("3.52.0") && !atLeast("4.3.0");
    }

    /**
     * The bound on a handoff, the other side's release to the waiter's hold, in ms. A Redisson
     * waiter that missed the release message sleeps the TTL it was told (the holder's 10 s lease in
     * these tests), a module BLOCK waiter its 5 s BLOCK: a handoff under 3 s is the release's work.
     * The figures recorded are the real latency (a few ms); 3 s, not 1 s, because on a loaded
     * 2-core machine (four test parts at once) a JVM thread can be off a core for a second.
     */
    static final double HANDOFF_MS = 3_000;

    /** What was already reported not applicable (once per run, not per test). */
    private static final Set<String> NOT_APPLICABLE = ConcurrentHashMap.newKeySet();

    private Env() {
    }

    /** True when the version under test is {@code since} or later. */
    static boolean atLeast(String since) {
        return compare(VERSION, since) >= 0;
    }

    static int compare(String a, String b) {
        String[] x = a.split("[.-]");
        String[] y = b.split("[.-]");
        for (int i = 0; i < Math.max(x.length, y.length); i++) {
            int p = i < x.length ? parse(x[i]) : 0;
            int q = i < y.length ? parse(y[i]) : 0;
            if (p != q) {
                return Integer.compare(p, q);
            }
        }
        return 0;
    }

    private static int parse(String part) {
        try {
            return Integer.parseInt(part);
        } catch (NumberFormatException e) {
            return 0;
        }
    }

    /**
     * Skips a test the version cannot run (JUnit reports it as skipped, never
     * passed), and records it as not applicable.
     */
    static void requireVersion(String since, String what) {
        boolean ok = atLeast(since);
        if (!ok && NOT_APPLICABLE.add(what)) {
            record("n/a", what + ": Redisson " + VERSION + " has none (first in " + since + ")");
        }
        Assumptions.assumeTrue(ok, () -> "not applicable: " + what + " needs Redisson " + since
                + "+, this run is " + VERSION);
    }

    /**
     * A Redisson method that only some versions have, found by reflection (the tests compile
     * against every version). The method must be there from {@code since} on and missing before
     * (else the test fails: the version table is wrong); when missing, the test is skipped and
     * recorded as not applicable, never counted as passed.
     */
    static Method requireMethod(String since, String what, Class<?> type, String name, Class<?>... parameters) {
        Method method = methodSince(since, type, name, parameters);
        requireVersion(since, what);
        return method;
    }

    /**
     * The same check for a method a test uses where the version has it and goes without
     * otherwise: null before {@code since}, and a failure when the method is there before its
     * version or missing after it.
     */
    static Method methodSince(String since, Class<?> type, String name, Class<?>... parameters) {
        Method method;
        try {
            method = type.getMethod(name, parameters);
        } catch (NoSuchMethodException missing) {
            method = null;
        }
        if ((method != null) != atLeast(since)) {
            throw new AssertionError(type.getSimpleName() + "." + name + " is " + (method == null ? "missing from" : "in")
                    + " Redisson " + VERSION + ", against the table (first in " + since + ")");
        }
        return method;
    }

    /** A Redisson client on one server, with the given watchdog timeout. */
    static RedissonClient redisson(Servers.Server server, long watchdogMs) {
        Config config = new Config();
        config.setLockWatchdogTimeout(watchdogMs);
        config.useSingleServer().setAddress(server.address())
                .setConnectionMinimumIdleSize(2).setConnectionPoolSize(8)
                .setSubscriptionConnectionMinimumIdleSize(1);
        return Redisson.create(config);
    }

    /**
     * A module-side owner in Redisson's format, {@code <uuid>:<threadId>},
     * with a UUID of its own: never Redisson's instance id.
     */
    static String moduleOwner(RedissonClient redisson) {
        String uuid;
        do {
            uuid = UUID.randomUUID().toString();
        } while (uuid.equals(redisson.getId()));
        return uuid + ":" + Thread.currentThread().getId();
    }

    /**
     * The least TTL a key given {@code ttl} ms at or after {@code since} (System.nanoTime) can have
     * left now: a TTL shrinks with the time gone by, no faster (less 20 ms for the clocks'
     * granularity: Redis counts milliseconds). A slow machine makes the time gone by longer, not
     * the check looser or tighter.
     */
    static long leastTtlLeft(long ttl, long since) {
        return ttl - TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - since) - 20;
    }

    /** Waits until {@code condition} holds, failing after {@code ms}. */
    static void await(String what, long ms, BooleanSupplier condition) throws InterruptedException {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(ms);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                throw new AssertionError("timed out after " + ms + " ms waiting for " + what);
            }
            Thread.sleep(1);
        }
    }

    /**
     * A key or channel derived from a lock name as Redisson derives it: the
     * name in braces, or as it is when it already has a hash tag.
     */
    static String derived(String prefix, String lock) {
        return lock.contains("{") ? prefix + ":" + lock : prefix + ":{" + lock + "}";
    }

    /** Subscribers of a channel (classic pub/sub), to know a Redisson waiter is listening. */
    static long subscribers(Raw raw, String channel) {
        List<?> reply = (List<?>) raw.call("PUBSUB", "NUMSUB", channel);
        return (Long) reply.get(1);
    }

    /** Clients blocked on the server (a module waiter in BLOCK). */
    static long blockedClients(Raw raw) {
        String info = (String) raw.call("INFO", "clients");
        for (String line : info.split("\r?\n")) {
            if (line.startsWith("blocked_clients:")) {
                return Long.parseLong(line.substring("blocked_clients:".length()).trim());
            }
        }
        throw new AssertionError("no blocked_clients in INFO clients");
    }

    /**
     * Scripts run on a server since its last CONFIG RESETSTAT (EVAL and EVALSHA, not a NOSCRIPT):
     * how a test knows a Redisson thread ran its lock script again after subscribing.
     */
    static long scriptCalls(Raw on) {
        long calls = 0;
        for (String line : ((String) on.call("INFO", "commandstats")).split("\r?\n")) {
            if (line.startsWith("cmdstat_eval:") || line.startsWith("cmdstat_evalsha:")) {
                calls += Long.parseLong(line.replaceAll("^[^:]*:calls=([0-9]+),.*", "$1"))
                        - Long.parseLong(line.replaceAll(".*,failed_calls=([0-9]+).*", "$1"));
            }
        }
        return calls;
    }

    /** One Java thread, so that Redisson's per-thread holds have a thread to belong to. */
    static final class JavaThread implements AutoCloseable {
        private final ExecutorService executor = Executors.newSingleThreadExecutor();

        <T> Future<T> submit(Callable<T> task) {
            return executor.submit(task);
        }

        <T> T run(Callable<T> task) throws Exception {
            return executor.submit(task).get(20, TimeUnit.SECONDS);
        }

        @Override
        public void close() {
            executor.shutdownNow();
        }
    }

    /** The p-th percentile (nearest rank) of {@code samples}, in milliseconds. */
    static double percentile(List<Double> samples, double p) {
        List<Double> sorted = new ArrayList<>(samples);
        Collections.sort(sorted);
        int rank = (int) Math.ceil(p / 100.0 * sorted.size());
        return sorted.get(Math.max(0, Math.min(sorted.size() - 1, rank - 1)));
    }

    /** "p50 x ms, p99 y ms (n)" of handoff samples. */
    static String summary(List<Double> samples) {
        return String.format(Locale.ROOT, "p50 %.2f ms, p99 %.2f ms, max %.2f ms (n=%d)",
                percentile(samples, 50), percentile(samples, 99),
                Collections.max(samples), samples.size());
    }

    /**
     * Records a figure: printed, and appended to target/&lt;version&gt;/results.txt,
     * from which docs/redisson.md's matrix is written.
     */
    static synchronized void record(String key, String value) {
        String line = "[redisson " + VERSION + "] " + key + ": " + value;
        System.out.println(line);
        String file = System.getProperty("rwlock.results");
        if (file == null) {
            return;
        }
        Path path = Paths.get(file);
        try {
            Files.createDirectories(path.getParent());
            Files.writeString(path, line + "\n", StandardCharsets.UTF_8,
                    StandardOpenOption.CREATE, StandardOpenOption.APPEND);
        } catch (IOException e) {
            throw new IllegalStateException("cannot write " + path, e);
        }
    }
}
