package io.github.rwlock.client;

import static org.junit.jupiter.api.Assertions.assertEquals;
import static org.junit.jupiter.api.Assertions.assertTrue;
import static org.junit.jupiter.api.Assertions.fail;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.time.Duration;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.Iterator;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.TimeUnit;
import java.util.function.BooleanSupplier;
import java.util.function.IntConsumer;
import java.util.function.IntPredicate;
import java.util.function.IntSupplier;
import java.util.function.Supplier;
import java.util.regex.Matcher;
import java.util.regex.Pattern;
import java.util.stream.Stream;
import org.junit.jupiter.api.AfterAll;
import org.junit.jupiter.api.BeforeAll;
import org.junit.jupiter.api.DynamicTest;
import org.junit.jupiter.api.TestFactory;
import org.junit.jupiter.api.TestInstance;
import redis.clients.jedis.Connection;
import redis.clients.jedis.DefaultJedisClientConfig;
import redis.clients.jedis.JedisPooled;
import redis.clients.jedis.exceptions.JedisDataException;

/**
 * The client contract's shared scenarios (clients/contract/README.md), read from
 * ../contract/scenarios.json (or RWLOCK_SCENARIOS) and run through this client's public API
 * against one server. A step or field this runner does not know fails its scenario.
 */
@TestInstance(TestInstance.Lifecycle.PER_CLASS)
class ScenarioTest {
    private static final Pattern OWNER = Pattern.compile("\\$owner\\(([^)]+)\\)");
    private static final Set<String> SCENARIO_FIELDS = Set.of("name", "clients", "locks", "steps");
    private static final Set<String> CLIENT_FIELDS = Set.of("watchdog_timeout_ms", "socket_timeout_ms");
    private static final Set<String> LOCK_FIELDS = Set.of("client", "kind", "name", "holds", "session");

    private RedisServer server;

    @BeforeAll
    void start() {
        server = new RedisServer();
    }

    @AfterAll
    void stop() {
        if (server != null) {
            server.close();
        }
    }

    static Path scenarios() {
        String env = System.getenv("RWLOCK_SCENARIOS");
        return env == null || env.isEmpty() ? RedisServer.REPO.resolve("clients/contract/scenarios.json") : Paths.get(env);
    }

    @TestFactory
    Stream<DynamicTest> sharedScenarios() throws Exception {
        JsonNode root = new ObjectMapper().readTree(Files.readString(scenarios()));
        assertEquals(1, root.path("version").asInt(), "scenarios.json version");
        known(root, Set.of("version", "scenarios"), "the file");
        List<DynamicTest> tests = new ArrayList<>();
        for (JsonNode scenario : root.get("scenarios")) {
            String name = scenario.path("name").asText();
            tests.add(DynamicTest.dynamicTest(name, () -> new Run(scenario).run()));
        }
        assertTrue(!tests.isEmpty(), "no scenarios in " + scenarios());
        return tests.stream();
    }

    private static void known(JsonNode node, Set<String> fields, String where) {
        Iterator<String> names = node.fieldNames();
        while (names.hasNext()) {
            String field = names.next();
            if (!fields.contains(field)) {
                fail(where + ": unknown field " + field);
            }
        }
    }

    /** One scenario's clients, locks, saved values and later steps. */
    private final class Run {
        private final JsonNode scenario;
        private final String name;
        private final List<AutoCloseable> closing = new ArrayList<>();
        private final Map<String, Client> clients = new HashMap<>();
        private final Map<String, DistributedLock> locks = new HashMap<>();
        private final Map<String, DistributedSemaphore> semaphores = new HashMap<>();
        private final Map<String, DistributedCountDownLatch> latches = new HashMap<>();
        private final Map<String, DistributedPermitExpirableSemaphore> permits = new HashMap<>();
        /** The permit ids each {@code save_ids} name holds. */
        private final Map<String, List<String>> ids = new HashMap<>();
        private final Map<String, Object> saved = new HashMap<>();
        private final List<CompletableFuture<Void>> later = new ArrayList<>();
        private int index = -1;

        Run(JsonNode scenario) {
            this.scenario = scenario;
            this.name = scenario.path("name").asText();
        }

        void run() throws Exception {
            server.call("FLUSHALL");
            server.call("CONFIG", "RESETSTAT");
            try {
                known(scenario, SCENARIO_FIELDS, name);
                build();
                JsonNode steps = scenario.get("steps");
                for (index = 0; index < steps.size(); index++) {
                    step(steps.get(index));
                }
                for (CompletableFuture<Void> pending : later) {
                    pending.get(30, TimeUnit.SECONDS);
                }
            } catch (AssertionError | Exception e) {
                throw new AssertionError("scenario \"" + name + "\", step " + index + ": " + e.getMessage(), e);
            } finally {
                for (AutoCloseable c : closing) {
                    c.close();
                }
            }
        }

        private void build() {
            Map<String, DistributedReadWriteLock> rws = new HashMap<>();
            Iterator<Map.Entry<String, JsonNode>> entries = scenario.get("clients").fields();
            while (entries.hasNext()) {
                Map.Entry<String, JsonNode> entry = entries.next();
                JsonNode options = entry.getValue();
                known(options, CLIENT_FIELDS, "client " + entry.getKey());
                DefaultJedisClientConfig.Builder config = DefaultJedisClientConfig.builder();
                if (options.has("socket_timeout_ms")) {
                    config.socketTimeoutMillis(options.get("socket_timeout_ms").asInt());
                }
                JedisPooled jedis = new JedisPooled(server.hostAndPort(), config.build());
                closing.add(jedis);
                Client.Builder builder = Client.builder(jedis);
                if (options.has("watchdog_timeout_ms")) {
                    builder.watchdogTimeout(Duration.ofMillis(options.get("watchdog_timeout_ms").asLong()));
                }
                Client client = builder.build();
                closing.add(0, client);
                clients.put(entry.getKey(), client);
            }
            Iterator<Map.Entry<String, JsonNode>> lockEntries = scenario.get("locks").fields();
            while (lockEntries.hasNext()) {
                Map.Entry<String, JsonNode> entry = lockEntries.next();
                JsonNode spec = entry.getValue();
                known(spec, LOCK_FIELDS, "lock " + entry.getKey());
                Client client = clients.get(spec.get("client").asText());
                if (client == null) {
                    fail("lock " + entry.getKey() + ": unknown client " + spec.get("client"));
                }
                LockOptions options = LockOptions.defaults().withSession(spec.path("session").asBoolean(false));
                String kind = spec.get("kind").asText();
                String lockName = spec.path("name").asText();
                if (kind.equals("semaphore") || kind.equals("latch") || kind.equals("permit")) {
                    if (options.session()) {
                        fail("lock " + entry.getKey() + ": a " + kind + " takes no session");
                    }
                    if (kind.equals("semaphore")) {
                        semaphores.put(entry.getKey(), new DistributedSemaphore(client, lockName));
                    } else if (kind.equals("permit")) {
                        permits.put(entry.getKey(), new DistributedPermitExpirableSemaphore(client, lockName));
                    } else {
                        latches.put(entry.getKey(), new DistributedCountDownLatch(client, lockName));
                    }
                    continue;
                }
                DistributedLock lock = switch (kind) {
                    case "plain" -> new PlainLock(client, lockName, options);
                    case "fenced" -> new PlainLock(client, lockName, options.withFenced(true));
                    case "nonreentrant" -> new PlainLock(client, lockName, options.withReentrant(false));
                    case "fair" -> new FairLock(client, lockName, options);
                    case "read" -> rws.computeIfAbsent(spec.get("client").asText() + "\0" + lockName,
                            k -> new DistributedReadWriteLock(client, lockName, options)).readLock();
                    case "write" -> rws.computeIfAbsent(spec.get("client").asText() + "\0" + lockName,
                            k -> new DistributedReadWriteLock(client, lockName, options)).writeLock();
                    case "multi" -> {
                        List<Hold> holds = new ArrayList<>();
                        for (JsonNode hold : spec.get("holds")) {
                            holds.add(new Hold(HoldKind.valueOf(hold.get(0).asText()), hold.get(1).asText()));
                        }
                        yield new MultiLock(client, holds, options);
                    }
                    default -> throw new AssertionError("lock " + entry.getKey() + ": unknown kind " + kind);
                };
                locks.put(entry.getKey(), lock);
            }
        }

        private DistributedLock lock(JsonNode ref) {
            DistributedLock lock = locks.get(ref.asText());
            if (lock == null) {
                fail("unknown lock " + ref);
            }
            return lock;
        }

        private DistributedSemaphore semaphore(JsonNode ref) {
            DistributedSemaphore semaphore = semaphores.get(ref.asText());
            if (semaphore == null) {
                fail("unknown semaphore " + ref);
            }
            return semaphore;
        }

        private DistributedCountDownLatch latch(JsonNode ref) {
            DistributedCountDownLatch latch = latches.get(ref.asText());
            if (latch == null) {
                fail("unknown latch " + ref);
            }
            return latch;
        }

        private void step(JsonNode step) throws Exception {
            String action = step.fieldNames().next();
            if (semaphores.containsKey(step.get(action).asText()) && semaphoreStep(action, step)) {
                return;
            }
            if (latches.containsKey(step.get(action).asText()) && latchStep(action, step)) {
                return;
            }
            if (permits.containsKey(step.get(action).asText()) && permitStep(action, step)) {
                return;
            }
            switch (action) {
                case "acquire" -> acquire(step);
                case "release" -> {
                    known(step, Set.of("release", "expect"), "release step");
                    String outcome;
                    try {
                        lock(step.get("release")).unlock();
                        outcome = "ok";
                    } catch (LockException e) {
                        outcome = kind(e);
                    }
                    assertEquals(step.get("expect").asText(), outcome, "release");
                }
                case "held", "lost" -> {
                    known(step, Set.of(action, "expect", "within_ms"), action + " step");
                    DistributedLock lock = lock(step.get(action));
                    BooleanSupplier view = action.equals("held") ? lock::isHeldByCurrentThread : lock::isLost;
                    boolean expected = step.get("expect").asBoolean();
                    // within_ms: what the watchdog finds in the background, polled until it is as expected.
                    long within = step.path("within_ms").asLong(0);
                    long deadline = System.nanoTime() + TimeUnit.MILLISECONDS.toNanos(within);
                    while (view.getAsBoolean() != expected && System.nanoTime() < deadline) {
                        Thread.sleep(10);
                    }
                    assertEquals(expected, view.getAsBoolean(), action + " (within " + within + " ms)");
                }
                case "token" -> {
                    known(step, Set.of("token", "expect"), "token step");
                    expect(step.get("expect"), lock(step.get("token")).getToken(), "token");
                }
                case "redis" -> {
                    known(step, Set.of("redis", "expect", "save"), "redis step");
                    Object reply = raw(step.get("redis"));
                    expect(step.get("expect"), reply, "redis " + step.get("redis"));
                    if (step.has("save")) {
                        saved.put(step.get("save").asText(), reply);
                    }
                }
                case "later" -> {
                    known(step, Set.of("later"), "later step");
                    JsonNode body = step.get("later");
                    known(body, Set.of("after_ms", "redis", "expect"), "later step");
                    List<String> args = args(body.get("redis"));
                    long after = body.get("after_ms").asLong();
                    int at = index;
                    // A thread of its own: the common pool may have one thread on a 2-core machine,
                    // and two laters sleeping in it one after another fire late.
                    later.add(CompletableFuture.runAsync(() -> {
                        RedisServer.sleep(after);
                        try {
                            expect(body.get("expect"), rawArgs(args), "later (step " + at + ") " + args);
                        } catch (Exception e) {
                            throw new AssertionError(e);
                        }
                    }, task -> {
                        Thread thread = new Thread(task, "scenario-later");
                        thread.setDaemon(true);
                        thread.start();
                    }));
                }
                case "sleep_ms" -> {
                    known(step, Set.of("sleep_ms"), "sleep step");
                    Thread.sleep(step.get("sleep_ms").asLong());
                }
                case "calls" -> {
                    known(step, Set.of("calls"), "calls step");
                    Iterator<Map.Entry<String, JsonNode>> calls = step.get("calls").fields();
                    // One INFO for the whole step: each of its own would
                    // count among the INFO calls the step checks.
                    String stats = (String) server.call("INFO", "commandstats");
                    while (calls.hasNext()) {
                        Map.Entry<String, JsonNode> call = calls.next();
                        expect(call.getValue(), RedisServer.calls(call.getKey(), stats), "calls of " + call.getKey());
                    }
                }
                case "reset_calls" -> {
                    known(step, Set.of("reset_calls"), "reset step");
                    server.call("CONFIG", "RESETSTAT");
                }
                default -> fail("unknown step " + action);
            }
        }

        private void acquire(JsonNode step) throws Exception {
            known(step, Set.of("acquire", "wait_ms", "lease_ms", "expect", "elapsed_ms", "save_token"), "acquire step");
            DistributedLock lock = lock(step.get("acquire"));
            JsonNode wait = step.get("wait_ms");
            JsonNode lease = step.get("lease_ms");
            if (wait == null || lease == null) {
                fail("an acquire step needs wait_ms and lease_ms");
            }
            long start = System.nanoTime();
            String outcome;
            try {
                boolean taken = lock.acquire(wait.isNull() ? null : Duration.ofMillis(wait.asLong()),
                        lease.isNull() ? null : Duration.ofMillis(lease.asLong()));
                outcome = taken ? "acquired" : "refused";
            } catch (LockException e) {
                outcome = kind(e);
            }
            long elapsed = TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start);
            assertEquals(step.get("expect").asText(), outcome, "acquire");
            elapsed(step, elapsed);
            if (step.has("save_token")) {
                saved.put(step.get("save_token").asText(), lock.getToken());
            }
        }

        /** The step's {@code elapsed_ms: [lo, hi]}, when it has one. */
        private void elapsed(JsonNode step, long elapsed) {
            if (step.has("elapsed_ms")) {
                long lo = step.get("elapsed_ms").get(0).asLong();
                long hi = step.get("elapsed_ms").get(1).asLong();
                assertTrue(elapsed >= lo && elapsed <= hi, "took " + elapsed + " ms, not within [" + lo + ", " + hi + "]");
            }
        }

        /**
         * A step of a semaphore (clients/contract/README.md); false when {@code action} is none of
         * them (a raw command or the like, run as for the locks).
         */
        private boolean semaphoreStep(String action, JsonNode step) throws Exception {
            DistributedSemaphore semaphore = semaphore(step.get(action));
            int permits = step.path("permits").asInt(1);
            switch (action) {
                case "acquire" -> {
                    known(step, Set.of("acquire", "permits", "wait_ms", "expect", "elapsed_ms"), "semaphore acquire step");
                    JsonNode wait = step.get("wait_ms");
                    if (wait == null) {
                        fail("an acquire step needs wait_ms");
                    }
                    long start = System.nanoTime();
                    String outcome;
                    try {
                        boolean taken;
                        if (wait.isNull()) {
                            semaphore.acquire(permits);
                            taken = true;
                        } else if (wait.asLong() == 0) {
                            taken = semaphore.tryAcquire(permits);
                        } else {
                            taken = semaphore.tryAcquire(permits, wait.asLong(), TimeUnit.MILLISECONDS);
                        }
                        outcome = taken ? "acquired" : "refused";
                    } catch (LockException e) {
                        outcome = kind(e);
                    }
                    assertEquals(step.get("expect").asText(), outcome, "acquire");
                    elapsed(step, TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start));
                }
                case "release" -> {
                    known(step, Set.of("release", "permits", "expect"), "semaphore release step");
                    String outcome;
                    try {
                        semaphore.release(permits);
                        outcome = "ok";
                    } catch (LockException e) {
                        outcome = kind(e);
                    }
                    assertEquals(step.get("expect").asText(), outcome, "release");
                }
                case "drain" -> reads(step, action, () -> (long) semaphore.drainPermits());
                default -> {
                    return countStep(action, step, semaphore::trySetPermits, semaphore::addPermits,
                            semaphore::availablePermits);
                }
            }
            return true;
        }

        /** A step of a latch; false when {@code action} is none of them. */
        private boolean latchStep(String action, JsonNode step) throws Exception {
            DistributedCountDownLatch latch = latch(step.get(action));
            switch (action) {
                case "try_set_count" -> {
                    known(step, Set.of("try_set_count", "count", "expect"), "try_set_count step");
                    assertEquals(step.get("expect").asBoolean(), latch.trySetCount(required(step, "count").asLong()),
                            "try_set_count");
                }
                case "count_down" -> {
                    known(step, Set.of("count_down"), "count_down step");
                    latch.countDown();
                }
                case "count" -> reads(step, action, latch::getCount);
                case "await" -> {
                    known(step, Set.of("await", "wait_ms", "expect", "elapsed_ms"), "await step");
                    JsonNode wait = step.get("wait_ms");
                    if (wait == null) {
                        fail("an await step needs wait_ms");
                    }
                    long start = System.nanoTime();
                    boolean reached;
                    if (wait.isNull()) {
                        latch.await();
                        reached = true;
                    } else {
                        reached = latch.await(wait.asLong(), TimeUnit.MILLISECONDS);
                    }
                    assertEquals(required(step, "expect").asBoolean(), reached, "await");
                    elapsed(step, TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start));
                }
                case "delete" -> reads(step, action, latch::delete);
                default -> {
                    return false;
                }
            }
            return true;
        }

        /** A step of a permit-expirable semaphore; false when {@code action} is none of them. */
        private boolean permitStep(String action, JsonNode step) throws Exception {
            DistributedPermitExpirableSemaphore permit = permits.get(step.get(action).asText());
            switch (action) {
                case "acquire" -> {
                    known(step, Set.of("acquire", "permits", "lease_ms", "wait_ms", "expect", "elapsed_ms", "save_ids"),
                            "permit acquire step");
                    JsonNode wait = step.get("wait_ms");
                    JsonNode lease = step.get("lease_ms");
                    if (wait == null || lease == null) {
                        fail("a permit acquire step needs wait_ms and lease_ms");
                    }
                    long start = System.nanoTime();
                    String outcome;
                    List<String> got = List.of();
                    try {
                        got = permit.tryAcquire(step.path("permits").asInt(1),
                                wait.isNull() ? null : Duration.ofMillis(wait.asLong()),
                                lease.isNull() ? null
                                        : lease.asLong() == -1 ? DistributedPermitExpirableSemaphore.NEVER_EXPIRES
                                        : Duration.ofMillis(lease.asLong()));
                        outcome = got.isEmpty() ? "refused" : "acquired";
                    } catch (LockException e) {
                        outcome = kind(e);
                    }
                    assertEquals(step.get("expect").asText(), outcome, "acquire");
                    elapsed(step, TimeUnit.NANOSECONDS.toMillis(System.nanoTime() - start));
                    if (!got.isEmpty()) {
                        assertEquals(step.path("permits").asInt(1), got.size(), "ids");
                        for (String id : got) {
                            assertTrue(id.matches("[0-9a-f]{32}"), "a permit id: " + id);
                        }
                    }
                    if (step.has("save_ids")) {
                        ids.put(step.get("save_ids").asText(), got);
                    }
                }
                case "release" -> {
                    known(step, Set.of("release", "ids", "expect"), "permit release step");
                    String outcome;
                    try {
                        permit.release(savedIds(step));
                        outcome = "ok";
                    } catch (LockException e) {
                        outcome = kind(e);
                    }
                    assertEquals(step.get("expect").asText(), outcome, "release");
                }
                case "update_lease" -> {
                    known(step, Set.of("update_lease", "ids", "lease_ms", "expect"), "update_lease step");
                    long lease = required(step, "lease_ms").asLong();
                    assertEquals(step.get("expect").asBoolean(), permit.updateLeaseTime(oneId(step), lease, TimeUnit.MILLISECONDS),
                            "update_lease");
                }
                case "lease_left" -> {
                    known(step, Set.of("lease_left", "ids", "expect"), "lease_left step");
                    expect(required(step, "expect"), permit.getLeaseTime(oneId(step)), "lease_left");
                }
                case "acquired" -> reads(step, action, () -> (long) permit.acquiredPermits());
                default -> {
                    return countStep(action, step, permit::trySetPermits, permit::addPermits, permit::availablePermits);
                }
            }
            return true;
        }

        /**
         * A count step both semaphores take (try_set_permits, add_permits, available); false when
         * {@code action} is none of them.
         */
        private boolean countStep(String action, JsonNode step, IntPredicate trySet, IntConsumer add,
                IntSupplier available) {
            switch (action) {
                case "try_set_permits" -> {
                    known(step, Set.of("try_set_permits", "permits", "expect"), "try_set_permits step");
                    assertEquals(step.get("expect").asBoolean(), trySet.test(required(step, "permits").asInt()),
                            "try_set_permits");
                }
                case "add_permits" -> {
                    known(step, Set.of("add_permits", "permits"), "add_permits step");
                    add.accept(required(step, "permits").asInt());
                }
                case "available" -> reads(step, action, () -> (long) available.getAsInt());
                default -> {
                    return false;
                }
            }
            return true;
        }

        private List<String> savedIds(JsonNode step) {
            List<String> saved = ids.get(required(step, "ids").asText());
            if (saved == null || saved.isEmpty()) {
                fail("no ids saved under " + step.get("ids"));
            }
            return saved;
        }

        private String oneId(JsonNode step) {
            List<String> saved = savedIds(step);
            assertEquals(1, saved.size(), "one id saved under " + step.get("ids"));
            return saved.get(0);
        }

        /** A step {@code {action: ref, expect: X}} whose call replies one value, compared with X. */
        private void reads(JsonNode step, String action, Supplier<Object> call) {
            known(step, Set.of(action, "expect"), action + " step");
            JsonNode x = required(step, "expect");
            expect(x, call.get(), action);
        }

        private JsonNode required(JsonNode step, String field) {
            JsonNode value = step.get(field);
            if (value == null || value.isNull()) {
                fail("the step needs " + field + ": " + step);
            }
            return value;
        }

        private String kind(LockException e) {
            String simple = e.getClass().getSimpleName();
            return simple.endsWith("Exception") ? simple.substring(0, simple.length() - "Exception".length()) : simple;
        }

        private List<String> args(JsonNode array) {
            List<String> args = new ArrayList<>();
            for (JsonNode arg : array) {
                String text = arg.asText();
                Matcher owner = OWNER.matcher(text);
                StringBuilder out = new StringBuilder();
                while (owner.find()) {
                    owner.appendReplacement(out, Matcher.quoteReplacement(lock(new ObjectMapper().valueToTree(owner.group(1))).getOwner()));
                }
                owner.appendTail(out);
                text = out.toString();
                if (text.startsWith("$") && saved.containsKey(text.substring(1))) {
                    text = String.valueOf(saved.get(text.substring(1)));
                }
                args.add(text);
            }
            return args;
        }

        private Object raw(JsonNode array) {
            return rawArgs(args(array));
        }

        private Object rawArgs(List<String> args) {
            try (Connection c = server.connection()) {
                return RedisServer.call(c, args.toArray(new String[0]));
            } catch (JedisDataException e) {
                return e;
            }
        }

        /** Compares a reply (or value) with an expected X of the contract. */
        private void expect(JsonNode x, Object actual, String what) {
            if (x == null) {
                fail(what + ": no expect");
            }
            if (actual instanceof JedisDataException error && !(x.isObject() && x.has("error"))) {
                fail(what + ": error reply " + error.getMessage());
            }
            if (x.isNull()) {
                assertEquals(null, actual, what);
            } else if (x.isIntegralNumber()) {
                assertEquals(x.asLong(), number(actual, what), what);
            } else if (x.isTextual()) {
                assertEquals(x.asText(), actual, what);
            } else if (x.isBoolean()) {
                assertEquals(x.asBoolean(), actual, what);
            } else if (x.isArray()) {
                assertTrue(actual instanceof List<?>, what + ": not an array: " + actual);
                List<?> items = (List<?>) actual;
                assertEquals(x.size(), items.size(), what + ": length");
                for (int i = 0; i < x.size(); i++) {
                    expect(x.get(i), items.get(i), what + "[" + i + "]");
                }
            } else if (x.isObject()) {
                expectObject(x, actual, what);
            } else {
                fail(what + ": unknown expectation " + x);
            }
        }

        private void expectObject(JsonNode x, Object actual, String what) {
            if (x.size() != 1) {
                fail(what + ": an expectation object has one key: " + x);
            }
            String key = x.fieldNames().next();
            JsonNode value = x.get(key);
            switch (key) {
                case "between" -> {
                    long n = number(actual, what);
                    assertTrue(n >= value.get(0).asLong() && n <= value.get(1).asLong(), what + ": " + n + " not within " + value);
                }
                case "match" -> assertTrue(actual instanceof String s && Pattern.compile(value.asText()).matcher(s).matches(),
                        what + ": " + actual + " does not match " + value.asText());
                case "each_match" -> {
                    assertTrue(actual instanceof List<?>, what + ": not an array: " + actual);
                    for (Object item : (List<?>) actual) {
                        assertTrue(item instanceof String s && Pattern.compile(value.asText()).matcher(s).matches(),
                                what + ": " + item + " does not match " + value.asText());
                    }
                }
                case "len" -> {
                    assertTrue(actual instanceof List<?>, what + ": not an array: " + actual);
                    assertEquals(value.asInt(), ((List<?>) actual).size(), what + ": length");
                }
                case "gt" -> assertTrue(number(actual, what) > number(savedValue(value), what), what + ": " + actual + " not > " + value);
                case "eq" -> assertEquals(number(savedValue(value), what), number(actual, what), what);
                case "error" -> assertTrue(actual instanceof JedisDataException e && e.getMessage().startsWith(value.asText()),
                        what + ": " + actual + " is not an error starting " + value.asText());
                default -> fail(what + ": unknown expectation " + key);
            }
        }

        private Object savedValue(JsonNode ref) {
            String text = ref.asText();
            if (!text.startsWith("$") || !saved.containsKey(text.substring(1))) {
                fail("unknown saved value " + text);
            }
            return saved.get(text.substring(1));
        }

        private long number(Object value, String what) {
            if (value instanceof Long n) {
                return n;
            }
            if (value instanceof String s && s.matches("-?[0-9]+")) {
                return Long.parseLong(s);
            }
            throw new AssertionError(what + ": not an integer: " + value);
        }
    }
}
