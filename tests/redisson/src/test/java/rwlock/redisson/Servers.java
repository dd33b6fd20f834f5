package rwlock.redisson;

import java.io.IOException;
import java.net.InetSocketAddress;
import java.net.ServerSocket;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.ArrayList;
import java.util.Comparator;
import java.util.List;
import java.util.concurrent.TimeUnit;
import java.util.stream.Stream;

/**
 * redis-server processes with the module loaded, as the Rust and Python suites
 * start them: 127.0.0.1 on a free port, a temporary directory, no persistence,
 * each stopped by its own process (never by name).
 *
 * <p>RWLOCK_REDIS_SERVER picks the binary (default {@code redis-server} on
 * PATH); RWLOCK_MODULE the module (default the repository's
 * target/release/librwlock.so). A missing module fails the tests, it never
 * skips them.
 */
final class Servers {
    private static final long START_TIMEOUT_MS = 10_000;

    private Servers() {
    }

    /** The module every server loads, failing when it is missing. */
    static Path module() {
        String configured = System.getProperty("rwlock.module");
        if (configured == null || configured.isBlank() || configured.startsWith("${")) {
            configured = System.getenv("RWLOCK_MODULE");
        }
        Path path = configured == null || configured.isBlank()
                ? Paths.get(System.getProperty("user.dir")).resolve("../../target/release/librwlock.so").normalize()
                : Paths.get(configured);
        if (!Files.isRegularFile(path)) {
            throw new IllegalStateException("no module at " + path
                    + ": build it (make build) or set RWLOCK_MODULE");
        }
        return path;
    }

    static String binary() {
        String configured = System.getenv("RWLOCK_REDIS_SERVER");
        return configured == null || configured.isBlank() ? "redis-server" : configured;
    }

    /**
     * A port free now, and (for a cluster node) port + 10000 too: the cluster
     * bus. Another process can take it before the server binds; {@link #start}
     * then retries on a new port.
     */
    static int freePort(boolean withBus) throws IOException {
        for (int attempt = 0; attempt < 100; attempt++) {
            int port;
            try (ServerSocket socket = new ServerSocket()) {
                socket.bind(new InetSocketAddress("127.0.0.1", 0));
                port = socket.getLocalPort();
            }
            if (!withBus) {
                return port;
            }
            if (port + 10000 > 65535) {
                continue;
            }
            try (ServerSocket bus = new ServerSocket()) {
                bus.bind(new InetSocketAddress("127.0.0.1", port + 10000));
                return port;
            } catch (IOException taken) {
                // The bus port is in use: try another pair.
            }
        }
        throw new IOException("no free port");
    }

    /** One redis-server with the module. */
    static final class Server implements AutoCloseable {
        final int port;
        final Path dir;
        private final Process process;

        private Server(int port, Path dir, Process process) {
            this.port = port;
            this.dir = dir;
            this.process = process;
        }

        /** The address Redisson connects to. */
        String address() {
            return "redis://127.0.0.1:" + port;
        }

        /** Stops the server by its own PID: SIGTERM, then SIGKILL after 5 s. */
        @Override
        public void close() {
            process.destroy();
            try {
                if (!process.waitFor(5, TimeUnit.SECONDS)) {
                    process.destroyForcibly().waitFor(5, TimeUnit.SECONDS);
                }
            } catch (InterruptedException e) {
                process.destroyForcibly();
                Thread.currentThread().interrupt();
            }
            deleteTree(dir);
        }
    }

    /** Starts a server with the module and {@code extra} arguments. */
    static Server start(boolean cluster, String... extra) throws IOException, InterruptedException {
        Path module = module();
        IOException last = null;
        for (int attempt = 0; attempt < 5; attempt++) {
            Path dir = Files.createTempDirectory("rwlock-redisson-");
            int port = freePort(cluster);
            List<String> argv = new ArrayList<>(List.of(binary(),
                    "--port", String.valueOf(port), "--bind", "127.0.0.1", "--dir", dir.toString(),
                    "--save", "", "--appendonly", "no", "--loadmodule", module.toString()));
            if (cluster) {
                argv.addAll(List.of("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                        "--cluster-node-timeout", "5000"));
            }
            argv.addAll(List.of(extra));
            Process process = new ProcessBuilder(argv)
                    .redirectErrorStream(true)
                    .redirectOutput(dir.resolve("server.log").toFile())
                    .start();
            if (waitReady(port, process)) {
                return new Server(port, dir, process);
            }
            String log = Files.exists(dir.resolve("server.log"))
                    ? Files.readString(dir.resolve("server.log")) : "";
            process.destroyForcibly().waitFor(5, TimeUnit.SECONDS);
            deleteTree(dir);
            last = new IOException("redis-server on port " + port + " did not start:\n" + log);
            if (!log.contains("Address already in use")) {
                break;
            }
        }
        throw last;
    }

    private static boolean waitReady(int port, Process process) throws InterruptedException {
        long deadline = System.currentTimeMillis() + START_TIMEOUT_MS;
        while (System.currentTimeMillis() < deadline) {
            if (!process.isAlive()) {
                return false;
            }
            try (Raw raw = new Raw(port)) {
                if ("PONG".equals(raw.call("PING"))) {
                    return true;
                }
            } catch (RuntimeException notYet) {
                // Not listening yet.
            }
            Thread.sleep(20);
        }
        return false;
    }

    static void deleteTree(Path dir) {
        try (Stream<Path> paths = Files.walk(dir)) {
            paths.sorted(Comparator.reverseOrder()).forEach(p -> p.toFile().delete());
        } catch (IOException ignored) {
            // A temporary directory left behind is harmless.
        }
    }
}
