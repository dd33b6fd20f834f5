import com.google.gson.Gson;
import com.google.gson.JsonObject;
import com.google.gson.JsonElement;
import io.github.rwlock.client.Client;
import io.github.rwlock.client.DistributedLock;
import io.github.rwlock.client.DistributedReadWriteLock;
import io.github.rwlock.client.FairLock;
import io.github.rwlock.client.Hold;
import io.github.rwlock.client.LockOptions;
import io.github.rwlock.client.MultiLock;
import io.github.rwlock.client.NotHeldException;
import io.github.rwlock.client.NotSyncedException;
import io.github.rwlock.client.PlainLock;
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.HashMap;
import java.util.HashSet;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.concurrent.ExecutorService;
import java.util.concurrent.Executors;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.HostAndPort;
import redis.clients.jedis.JedisClientConfig;
import redis.clients.jedis.JedisSentinelPool;
import redis.clients.jedis.exceptions.JedisDataException;

/**
 * The safety suite's driver for the Java package (tests/safety, mode javaclient): locks of every
 * kind with the package's default options, through one {@code Client} on a {@code
 * JedisSentinelPool}, which follows the master Sentinel names from one failover to the next.
 *
 * <p>One JSON object a line on stdin, one reply a line on stdout: {@code {"op": "acquire", "kind",
 * "lock", "owner", "lease_ms", "wait_ms", "side", "locks"}} -> granted (token, owner) | refused |
 * notsynced | maybe (detail); {@code {"op": "release", "kind", "lock", "owner"}} -> released |
 * notheld | maybe. kind: fenced, plain, rw (side read or write), fair, multi (locks), session,
 * block (fenced with a wait); wait_ms > 0 waits on the server (BLOCK). Environment (set by the
 * harness): SAFETY_SENTINELS (host:port,...), SAFETY_MASTER_NAME, SAFETY_NAT (announced
 * host:port=reachable host:port,...: the harness's proxies, given to Jedis as the masters'
 * {@code HostAndPortMapper}), SAFETY_TIMEOUT_MS (the connections' socket timeout).
 */
public final class SafetyDriver {
    private static final Gson GSON = new Gson();

    private final Client client;
    /**
     * Each attempt runs on a thread of its own, its release too: Java owners are {@code
     * <client UUID>:<thread id>}, so each attempt is an owner of its own, as each request thread
     * of a service is.
     */
    private final Map<String, Attempt> attempts = new HashMap<>();

    private record Attempt(DistributedLock lock, ExecutorService thread) {}

    private SafetyDriver(Client client) {
        this.client = client;
    }

    public static void main(String[] args) throws Exception {
        int timeout = Integer.parseInt(System.getenv("SAFETY_TIMEOUT_MS"));
        Map<HostAndPort, HostAndPort> nat = new HashMap<>();
        for (String pair : System.getenv("SAFETY_NAT").split(",")) {
            String[] sides = pair.split("=");
            nat.put(HostAndPort.from(sides[0]), HostAndPort.from(sides[1]));
        }
        Set<HostAndPort> sentinels = new HashSet<>();
        for (String s : System.getenv("SAFETY_SENTINELS").split(",")) {
            sentinels.add(HostAndPort.from(s));
        }
        JedisClientConfig sentinelConfig = DefaultJedisClientConfig.builder().timeoutMillis(timeout).build();
        JedisClientConfig masterConfig = DefaultJedisClientConfig.builder().timeoutMillis(timeout)
                .hostAndPortMapper(announced -> nat.getOrDefault(announced, announced)).build();
        PrintStream out = new PrintStream(System.out, true, StandardCharsets.UTF_8);
        try (JedisSentinelPool pool = new JedisSentinelPool(System.getenv("SAFETY_MASTER_NAME"), sentinels, masterConfig,
                sentinelConfig);
                Client client = Client.create(pool)) {
            SafetyDriver driver = new SafetyDriver(client);
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            for (String line = in.readLine(); line != null; line = in.readLine()) {
                JsonObject request = GSON.fromJson(line, JsonObject.class);
                out.println(GSON.toJson(driver.handle(request)));
            }
            driver.close();
        }
    }

    private Map<String, Object> handle(JsonObject request) throws InterruptedException {
        String owner = request.get("owner").getAsString();
        if (request.get("op").getAsString().equals("acquire")) {
            DistributedLock lock = lockFor(request);
            Duration lease = Duration.ofMillis(request.get("lease_ms").getAsLong());
            JsonElement waitMs = request.get("wait_ms");
            Duration wait = waitMs == null ? Duration.ZERO : Duration.ofMillis(waitMs.getAsLong());
            ExecutorService thread = Executors.newSingleThreadExecutor();
            try {
                // The token and the owner are the calling thread's view: read on that thread.
                Map<String, Object> granted = thread.submit(() -> lock.acquire(wait, lease) ? granted(lock) : null).get();
                if (granted == null) {
                    thread.shutdown();
                    return Map.of("outcome", "refused");
                }
                attempts.put(owner, new Attempt(lock, thread));
                return granted;
            } catch (ExecutionException e) {
                Throwable cause = e.getCause();
                if (cause instanceof NotSyncedException) {
                    // Released by the package, unless that release failed too: the worker's
                    // release asks the server, on this thread.
                    attempts.put(owner, new Attempt(lock, thread));
                    return Map.of("outcome", "notsynced", "detail", String.valueOf(cause.getMessage()));
                }
                if (refusedByServer(cause)) {
                    thread.shutdown();
                    return Map.of("outcome", "refused", "detail", String.valueOf(cause.getMessage()));
                }
                // May have been granted: the release below is asked, on this thread.
                attempts.put(owner, new Attempt(lock, thread));
                return Map.of("outcome", "maybe", "detail", cause.toString());
            }
        }
        Attempt attempt = attempts.get(owner);
        if (attempt == null) {
            return Map.of("outcome", "notheld", "detail", "no lock object");
        }
        try {
            // On the master of the moment: the pool follows Sentinel.
            attempt.thread().submit(attempt.lock()::unlock).get();
            forget(owner, attempt);
            return Map.of("outcome", "released");
        } catch (ExecutionException e) {
            if (e.getCause() instanceof NotHeldException) {
                forget(owner, attempt);
                return Map.of("outcome", "notheld", "detail", String.valueOf(e.getCause().getMessage()));
            }
            return Map.of("outcome", "maybe", "detail", e.getCause().toString());
        }
    }

    /**
     * The package's lock object for the request's kind: the read-write lock's write side, the
     * session and block kinds fenced, as the harness's command streams are.
     */
    private DistributedLock lockFor(JsonObject request) {
        String name = request.get("lock").getAsString();
        return switch (request.get("kind").getAsString()) {
            case "plain" -> new PlainLock(client, name);
            case "rw" -> {
                DistributedReadWriteLock rw = new DistributedReadWriteLock(client, name, LockOptions.defaults().withFenced(true));
                yield request.get("side").getAsString().equals("read") ? rw.readLock() : rw.writeLock();
            }
            case "fair" -> new FairLock(client, name);
            case "multi" -> {
                List<Hold> holds = request.getAsJsonArray("locks").asList().stream()
                        .map(n -> Hold.lock(n.getAsString())).toList();
                yield new MultiLock(client, holds);
            }
            case "session" -> new PlainLock(client, name, LockOptions.defaults().withFenced(true).withSession(true));
            default -> PlainLock.fenced(client, name); // fenced, block
        };
    }

    /** A grant's reply; the token only for the kinds that take one. */
    private static Map<String, Object> granted(DistributedLock lock) {
        Map<String, Object> reply = new HashMap<>();
        reply.put("outcome", "granted");
        reply.put("owner", lock.getOwner());
        Long token = lock.getToken();
        if (token != null) {
            reply.put("token", token);
        }
        return reply;
    }

    /** The server refused the command before writing (a replica now, loading). */
    private static boolean refusedByServer(Throwable error) {
        if (!(error instanceof JedisDataException) || error.getMessage() == null) {
            return false;
        }
        String message = error.getMessage();
        return message.startsWith("READONLY") || message.startsWith("LOADING") || message.startsWith("NOREPLICAS");
    }

    private void forget(String owner, Attempt attempt) {
        attempts.remove(owner);
        attempt.thread().shutdown();
    }

    private void close() {
        attempts.values().forEach(a -> a.thread().shutdownNow());
    }
}
