package rwlock.bench;

import io.github.rwlock.client.Client;
import io.github.rwlock.client.DistributedReadWriteLock;
import io.github.rwlock.client.FairLock;
import io.github.rwlock.client.PlainLock;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.concurrent.atomic.AtomicReference;
import java.util.concurrent.locks.Lock;
import java.util.function.BiFunction;
import java.util.function.Function;
import org.apache.commons.pool2.impl.GenericObjectPoolConfig;
import org.redisson.Redisson;
import org.redisson.api.RedissonClient;
import org.redisson.config.Config;
import redis.clients.jedis.Connection;
import redis.clients.jedis.JedisPooled;

/**
 * One scenario of make bench-clients (benches/clients/run.py) with one
 * library: this repository's client ({@code rwlock-lock}, {@code rwlock-fair},
 * {@code rwlock-rw}) or Redisson 4.7.0 ({@code redisson-lock},
 * {@code redisson-fair}, {@code redisson-rw}), both as
 * {@code java.util.concurrent.locks.Lock}, workers being threads (each an
 * owner, in both libraries), on pools of the same size. Warms up, prints
 * READY, runs for --seconds once it reads GO, prints its counts as one JSON
 * line, and releases what it holds once its standard input closes (after
 * run.py read the server's counters). With BENCH_REPLICA_PORT set, Redisson
 * is told of the replica (its checkLockSyncedSlaves, on by default, then
 * waits for it); this client learns it from the master.
 */
public final class Bench {
    /** Connections in either library's pool: more than the workers. */
    private static final int POOL = 16;

    private Bench() {}

    /** On one contended lock: from a holder starting its release to the next holder's acquisition returning. */
    private static final class Handoff {
        private long releaseAt;
        private int last = -1;
        private final List<Double> samples = new ArrayList<>();
        private long same;
        private long changes;

        synchronized void acquired(int worker) {
            long now = System.nanoTime();
            if (last == worker) {
                same++;
            } else if (last >= 0) {
                changes++;
                samples.add((now - releaseAt) / 1e3);
            }
            last = worker;
        }

        synchronized void releasing() {
            releaseAt = System.nanoTime();
        }
    }

    private static String phase(String scenario, List<Lock> workers, Lock writer, double seconds)
            throws InterruptedException {
        AtomicReference<Throwable> error = new AtomicReference<>();
        long[] per = new long[workers.size()];
        List<Double> waits = new ArrayList<>();
        Handoff handoff = new Handoff();
        long deadline = System.nanoTime() + (long) (seconds * 1e9);
        List<Thread> threads = new ArrayList<>();
        long start = System.nanoTime();
        for (int i = 0; i < workers.size(); i++) {
            int worker = i;
            Lock lock = workers.get(i);
            threads.add(new Thread(() -> {
                try {
                    while (System.nanoTime() < deadline && error.get() == null) {
                        if (scenario.equals("try")) {
                            if (lock.tryLock()) {
                                throw new IllegalStateException("a try took a held lock");
                            }
                            per[worker]++;
                            continue;
                        }
                        lock.lock();
                        if (scenario.equals("contended")) {
                            handoff.acquired(worker);
                            handoff.releasing();
                        }
                        lock.unlock();
                        per[worker]++;
                    }
                } catch (Throwable t) {
                    error.compareAndSet(null, t);
                }
            }));
        }
        if (writer != null) {
            threads.add(new Thread(() -> {
                try {
                    while (System.nanoTime() < deadline && error.get() == null) {
                        long t0 = System.nanoTime();
                        writer.lock();
                        double waited = (System.nanoTime() - t0) / 1e3;
                        writer.unlock();
                        synchronized (waits) {
                            waits.add(waited);
                        }
                    }
                } catch (Throwable t) {
                    error.compareAndSet(null, t);
                }
            }));
        }
        for (Thread t : threads) {
            t.start();
        }
        for (Thread t : threads) {
            t.join();
        }
        if (error.get() != null) {
            throw new IllegalStateException(error.get());
        }
        double elapsed = (System.nanoTime() - start) / 1e9;
        long cycles = waits.size();
        StringBuilder perText = new StringBuilder();
        for (long n : per) {
            cycles += n;
            perText.append(perText.length() == 0 ? "" : ",").append(n);
        }
        StringBuilder json = new StringBuilder();
        json.append("{\"cycles\":").append(cycles).append(",\"failed\":0,\"elapsed_s\":").append(elapsed)
                .append(",\"per_worker\":[").append(perText).append("],\"writer_wait_us\":").append(list(waits));
        if (scenario.equals("contended")) {
            json.append(",\"handoff_us\":").append(list(handoff.samples));
            if (handoff.same + handoff.changes > 0) {
                json.append(",\"same_again\":").append((double) handoff.same / (handoff.same + handoff.changes));
            }
        }
        return json.append('}').toString();
    }

    private static String list(List<Double> values) {
        StringBuilder b = new StringBuilder("[");
        for (Double v : values) {
            b.append(b.length() == 1 ? "" : ",").append(String.format(java.util.Locale.ROOT, "%.1f", v));
        }
        return b.append(']').toString();
    }

    public static void main(String[] argv) throws Exception {
        Map<String, String> args = new HashMap<>();
        for (int i = 0; i + 1 < argv.length; i += 2) {
            args.put(argv[i].replaceFirst("^--", ""), argv[i + 1]);
        }
        int port = Integer.parseInt(args.get("port"));
        String lib = args.getOrDefault("lib", "rwlock-lock");
        String scenario = args.getOrDefault("scenario", "uncontended");
        int n = Integer.parseInt(args.getOrDefault("workers", "1"));
        double seconds = Double.parseDouble(args.getOrDefault("seconds", "3"));
        double warmup = Double.parseDouble(args.getOrDefault("warmup", "2"));
        String replica = System.getenv("BENCH_REPLICA_PORT");

        JedisPooled jedis = null;
        Client client = null;
        RedissonClient redisson = null;
        Function<String, Lock> make;
        BiFunction<String, Boolean, Lock> makeRW = null;
        String kind = lib.substring(lib.indexOf('-') + 1);
        if (lib.startsWith("rwlock-")) {
            GenericObjectPoolConfig<Connection> pool = new GenericObjectPoolConfig<>();
            pool.setMaxTotal(POOL);
            pool.setMaxIdle(POOL);
            jedis = new JedisPooled(pool, "127.0.0.1", port);
            Client c = Client.create(jedis);
            client = c;
            switch (kind) {
                case "lock" -> make = name -> new PlainLock(c, name);
                case "fair" -> make = name -> new FairLock(c, name);
                case "rw" -> {
                    makeRW = (name, write) -> write
                            ? new DistributedReadWriteLock(c, name).writeLock()
                            : new DistributedReadWriteLock(c, name).readLock();
                    BiFunction<String, Boolean, Lock> rw = makeRW;
                    make = name -> rw.apply(name, true);
                }
                default -> throw new IllegalArgumentException("unknown library " + lib);
            }
        } else if (lib.startsWith("redisson-")) {
            Config config = new Config();
            if (replica != null) {
                config.useMasterSlaveServers()
                        .setMasterAddress("redis://127.0.0.1:" + port)
                        .addSlaveAddress("redis://127.0.0.1:" + replica)
                        .setMasterConnectionPoolSize(POOL)
                        .setMasterConnectionMinimumIdleSize(POOL);
            } else {
                config.useSingleServer()
                        .setAddress("redis://127.0.0.1:" + port)
                        .setConnectionPoolSize(POOL)
                        .setConnectionMinimumIdleSize(POOL);
            }
            RedissonClient r = Redisson.create(config);
            redisson = r;
            switch (kind) {
                case "lock" -> make = r::getLock;
                case "fair" -> make = r::getFairLock;
                case "rw" -> {
                    makeRW = (name, write) -> write
                            ? r.getReadWriteLock(name).writeLock()
                            : r.getReadWriteLock(name).readLock();
                    BiFunction<String, Boolean, Lock> rw = makeRW;
                    make = name -> rw.apply(name, true);
                }
                default -> throw new IllegalArgumentException("unknown library " + lib);
            }
        } else {
            throw new IllegalArgumentException("unknown library " + lib);
        }

        List<Lock> workers = new ArrayList<>();
        Lock writer = null;
        Lock holder = null;
        switch (scenario) {
            case "uncontended" -> {
                for (int i = 0; i < n; i++) {
                    workers.add(make.apply("bench:u:" + i));
                }
            }
            case "contended" -> {
                for (int i = 0; i < n; i++) {
                    workers.add(make.apply("bench:c"));
                }
            }
            case "try" -> {
                // Held by the main thread: another owner than the workers' threads.
                holder = make.apply("bench:t");
                holder.lock();
                for (int i = 0; i < n; i++) {
                    workers.add(make.apply("bench:t"));
                }
            }
            case "rw" -> {
                if (makeRW == null) {
                    throw new IllegalArgumentException(lib + " has no read-write lock");
                }
                for (int i = 0; i < n; i++) {
                    workers.add(makeRW.apply("bench:rw", false));
                }
                writer = makeRW.apply("bench:rw", true);
            }
            default -> throw new IllegalArgumentException("unknown scenario " + scenario);
        }

        phase(scenario, workers, writer, warmup);
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        System.out.println("READY");
        System.out.flush();
        if (!"GO".equals(in.readLine())) {
            throw new IllegalStateException("expected GO on standard input");
        }
        System.out.println(phase(scenario, workers, writer, seconds));
        System.out.flush();
        // run.py reads the server's counters, then closes our input.
        while (in.readLine() != null) {
            // nothing else comes
        }
        if (holder != null) {
            holder.unlock();
        }
        if (client != null) {
            client.close();
        }
        if (jedis != null) {
            jedis.close();
        }
        if (redisson != null) {
            redisson.shutdown();
        }
    }
}
