package io.github.rwlock.client;

import static org.junit.jupiter.api.Assertions.fail;

import java.io.IOException;
import java.net.InetAddress;
import java.net.ServerSocket;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.stream.Stream;
import redis.clients.jedis.Connection;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.JedisPooled;
import redis.clients.jedis.commands.ProtocolCommand;
import redis.clients.jedis.exceptions.JedisConnectionException;

/**
 * One redis-server with the module, on a free 127.0.0.1 port, in a temporary directory, stopped
 * by its own PID. RWLOCK_REDIS_SERVER: the binary (default redis-server on PATH). RWLOCK_MODULE:
 * the module (default the repository's target/release/librwlock.so); a missing one fails the
 * tests, never skips them.
 */
final class RedisServer implements AutoCloseable {
    static final Path REPO = Paths.get("").toAbsolutePath().getParent().getParent();

    final int port;
    final Path dir;
    private Process process;

    RedisServer(String... extra) {
        this(false, extra);
    }

    RedisServer(boolean cluster, String... extra) {
        this(server(cluster, extra));
    }

    /** What a server is started with: its directory, its port and its command line. */
    private record Launch(Path dir, int port, List<String> argv) {}

    private static Launch server(boolean cluster, String... extra) {
        String module = module(); // first: a missing module fails before anything is made
        Path dir = tempDir();
        int port = freePort(cluster ? 10000 : 0);
        List<String> argv = new ArrayList<>(List.of(binary(), "--port", Integer.toString(port), "--bind", "127.0.0.1",
                "--dir", dir.toString(), "--save", "", "--appendonly", "no", "--loadmodule", module));
        if (cluster) {
            argv.addAll(List.of("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"));
        }
        argv.addAll(List.of(extra));
        return new Launch(dir, port, argv);
    }

    /**
     * A Sentinel ({@code redis-server --sentinel}, no module: Sentinel runs no data commands)
     * watching the master at {@code masterPort} as {@code name}, with quorum 1: a failover needs
     * no other Sentinel, and {@code SENTINEL FAILOVER} starts one at once.
     */
    static RedisServer sentinel(String name, int masterPort) {
        Path dir = tempDir();
        int port = freePort(0);
        Path conf = dir.resolve("sentinel.conf");
        String text = String.join("\n", "port " + port, "bind 127.0.0.1", "dir " + dir,
                "sentinel monitor " + name + " 127.0.0.1 " + masterPort + " 1",
                "sentinel down-after-milliseconds " + name + " 1000",
                "sentinel failover-timeout " + name + " 10000", "");
        try {
            Files.writeString(conf, text);
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
        return new RedisServer(new Launch(dir, port, List.of(binary(), conf.toString(), "--sentinel")));
    }

    private RedisServer(Launch launch) {
        dir = launch.dir();
        port = launch.port();
        List<String> argv = launch.argv();
        try {
            process = new ProcessBuilder(argv).redirectErrorStream(true).redirectOutput(dir.resolve("server.log").toFile())
                    .start();
        } catch (IOException e) {
            throw new IllegalStateException("cannot start " + argv.get(0), e);
        }
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(10);
        while (true) {
            try (Connection c = connection()) {
                if (c.ping()) {
                    break;
                }
            } catch (JedisConnectionException e) {
                // not up yet
            }
            if (!process.isAlive() || System.nanoTime() > deadline) {
                String log = log();
                close();
                fail("redis-server did not start: " + log);
            }
            sleep(20);
        }
    }

    private static Path tempDir() {
        try {
            return Files.createTempDirectory("rwlock-java-");
        } catch (IOException e) {
            throw new IllegalStateException(e);
        }
    }

    static String binary() {
        String found = System.getenv("RWLOCK_REDIS_SERVER");
        return found == null || found.isEmpty() ? "redis-server" : found;
    }

    static String module() {
        String env = System.getenv("RWLOCK_MODULE");
        Path path = env == null || env.isEmpty() ? REPO.resolve("target/release/librwlock.so") : Paths.get(env);
        if (!Files.isRegularFile(path)) {
            fail("no module at " + path + ": cargo build --release, or set RWLOCK_MODULE");
        }
        return path.toString();
    }

    static int freePort(int alsoFree) {
        for (int i = 0; i < 100; i++) {
            int port;
            try (ServerSocket s = new ServerSocket(0, 1, InetAddress.getLoopbackAddress())) {
                port = s.getLocalPort();
            } catch (IOException e) {
                continue;
            }
            if (alsoFree == 0) {
                return port;
            }
            if (port + alsoFree > 65535) {
                continue;
            }
            try (ServerSocket s = new ServerSocket(port + alsoFree, 1, InetAddress.getLoopbackAddress())) {
                if (s.getLocalPort() == port + alsoFree) {
                    return port;
                }
            } catch (IOException e) {
                // the bus port is taken: another one
            }
        }
        throw new IllegalStateException("no free port");
    }

    HostAndPort hostAndPort() {
        return new HostAndPort("127.0.0.1", port);
    }

    /** A pool for a Client, with the given socket timeout. */
    JedisPooled pooled(int socketTimeoutMs) {
        return new JedisPooled(hostAndPort(),
                DefaultJedisClientConfig.builder().socketTimeoutMillis(socketTimeoutMs).build());
    }

    JedisPooled pooled() {
        return pooled(10_000);
    }

    /** A plain connection for raw commands. */
    Connection connection() {
        return new Connection(hostAndPort(), DefaultJedisClientConfig.builder().socketTimeoutMillis(10_000).build());
    }

    /** One raw command on a connection of its own, the reply decoded (bulk strings as text). */
    Object call(String... args) {
        try (Connection c = connection()) {
            return call(c, args);
        }
    }

    /**
     * Whether a replica acknowledges what this master streams now. A replica reports its link up
     * once it has loaded the master's data, but after a diskless sync the master streams to it only
     * from its first acknowledgement, up to a second later: a WAIT meanwhile lasts that long, and an
     * acquisition on a loaded machine fails with NotSynced. The probe is a PUBLISH, replicated but
     * writing no key.
     */
    boolean acknowledged() {
        try (Connection c = connection()) {
            call(c, "PUBLISH", "__rwlock_test_replica", "probe");
            return call(c, "WAIT", "1", "100") instanceof Long n && n >= 1;
        }
    }

    static Object call(Connection c, String... args) {
        c.sendCommand(new Name(args[0]), java.util.Arrays.copyOfRange(args, 1, args.length));
        return decode(c.getOne());
    }

    static Object decode(Object reply) {
        if (reply instanceof byte[] bytes) {
            return new String(bytes, StandardCharsets.UTF_8);
        }
        if (reply instanceof List<?> items) {
            List<Object> out = new ArrayList<>();
            for (Object item : items) {
                out.add(decode(item));
            }
            return out;
        }
        return reply;
    }

    long integer(String... args) {
        return (Long) call(args);
    }

    /** A field of INFO. */
    String info(String section, String field) {
        for (String line : ((String) call("INFO", section)).split("\r\n")) {
            if (line.startsWith(field + ":")) {
                return line.substring(field.length() + 1);
            }
        }
        return null;
    }

    /** How many times a command ran since the last CONFIG RESETSTAT. */
    long calls(String command) {
        return calls(command, (String) call("INFO", "commandstats"));
    }

    /** The calls of {@code command} in an {@code INFO commandstats} reply. */
    static long calls(String command, String stats) {
        String prefix = "cmdstat_" + command + ":calls=";
        for (String line : stats.split("\r\n")) {
            if (line.startsWith(prefix)) {
                return Long.parseLong(line.substring(prefix.length(), line.indexOf(',')));
            }
        }
        return 0;
    }

    long pid() {
        return process.pid();
    }

    void signal(String signal) {
        try {
            Process kill = new ProcessBuilder("kill", "-" + signal, Long.toString(process.pid())).start();
            kill.waitFor(5, TimeUnit.SECONDS);
        } catch (IOException e) {
            throw new IllegalStateException(e);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    String log() {
        try {
            String text = Files.readString(dir.resolve("server.log"));
            return text.length() > 4000 ? text.substring(text.length() - 4000) : text;
        } catch (IOException e) {
            return "(no log)";
        }
    }

    boolean running() {
        return process != null && process.isAlive();
    }

    /** By PID: SIGCONT (it may be paused), SIGTERM, SIGKILL if it lingers. */
    void stop() {
        Process p = process;
        process = null;
        if (p != null && p.isAlive()) {
            try {
                new ProcessBuilder("kill", "-CONT", Long.toString(p.pid())).start().waitFor(5, TimeUnit.SECONDS);
                p.destroy();
                if (!p.waitFor(5, TimeUnit.SECONDS)) {
                    p.destroyForcibly();
                    p.waitFor(5, TimeUnit.SECONDS);
                }
            } catch (IOException e) {
                p.destroyForcibly();
            } catch (InterruptedException e) {
                p.destroyForcibly();
                Thread.currentThread().interrupt();
            }
        }
    }

    @Override
    public void close() {
        stop();
        try (Stream<Path> files = Files.walk(dir)) {
            files.sorted(Comparator.reverseOrder()).forEach(f -> f.toFile().delete());
        } catch (IOException e) {
            // a temp dir left behind
        }
    }

    static void sleep(long ms) {
        try {
            Thread.sleep(ms);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
            throw new IllegalStateException(e);
        }
    }

    static void waitUntil(String what, long timeoutMs, BooleanSupplier condition) {
        long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(timeoutMs);
        while (!condition.getAsBoolean()) {
            if (System.nanoTime() > deadline) {
                fail("timed out waiting for " + what);
            }
            sleep(20);
        }
    }

    /** Any command name. */
    record Name(String name) implements ProtocolCommand {
        @Override
        public byte[] getRaw() {
            return name.getBytes(StandardCharsets.UTF_8);
        }
    }

}
