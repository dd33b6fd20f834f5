package rwlock.redisson;

import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.redisson.api.RedissonClient;

/**
 * What most test classes share: one server with the module, a Redisson
 * client on it whose {@code lockWatchdogTimeout} is 1 s ({@code lock()}
 * without a lease takes 1 s, renewed every ~333 ms), and a raw connection
 * for the module's commands. Started before a class's tests and stopped by
 * its PID after them; Surefire runs the classes one after another.
 */
abstract class OneServer {
    /** The server with the module. */
    static Servers.Server server;
    /** Real Redisson on it. */
    static RedissonClient redisson;
    /** The module's commands, on a connection of their own. */
    static Raw raw;

    @BeforeAll
    static void start() throws Exception {
        server = Servers.start(false);
        redisson = Env.redisson(server, 1_000);
        raw = new Raw(server.port);
    }

    @AfterAll
    static void stop() {
        if (raw != null) {
            raw.close();
            raw = null;
        }
        if (redisson != null) {
            redisson.shutdown();
            redisson = null;
        }
        if (server != null) {
            server.close();
            server = null;
        }
    }
}
