/**
 * The shared scenarios of every rwlock client (clients/contract/README.md):
 * each scenario of ../contract/scenarios.json (or RWLOCK_SCENARIOS) run
 * against one real server through this package's public API. A step or
 * field this runner does not know fails the scenario, never skips it.
 */

import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import { join } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import type { Redis } from "ioredis";
import { Client, type CountDownLatch, type Lock, type PermitExpirableSemaphore, type ReadWriteLock, type Semaphore } from "../src/index";
import { REPO, Server } from "./support";

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };
type Obj = { [key: string]: Json };

const file = process.env["RWLOCK_SCENARIOS"] || join(REPO, "clients/contract/scenarios.json");
const document = JSON.parse(readFileSync(file, "utf8")) as Obj;
assert.equal(document["version"], 1, `${file}: unknown version ${JSON.stringify(document["version"])}`);
const scenarios = document["scenarios"] as Obj[];
assert.ok(Array.isArray(scenarios) && scenarios.length > 0, `${file}: no scenarios`);

/** Fails on a field not among `known`. */
function onlyFields(what: string, object: Obj, known: string[]): void {
  for (const key of Object.keys(object)) {
    assert.ok(known.includes(key), `${what}: unknown field ${JSON.stringify(key)}`);
  }
}

function isObj(value: Json | undefined): value is Obj {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

/** An integer reply (or a string of one, as GET replies) as a BigInt. */
function bigOf(value: unknown, what: string): bigint {
  if (typeof value === "number" && Number.isInteger(value)) {
    return BigInt(value);
  }
  if (typeof value === "string" && /^-?\d+$/.test(value)) {
    return BigInt(value);
  }
  throw new assert.AssertionError({ message: `${what}: ${JSON.stringify(value)} is not an integer` });
}

/** The outcome of a call that resolves true/false or rejects with one of the package's errors: its name. */
async function outcomeOf(call: () => Promise<boolean>): Promise<string> {
  try {
    return (await call()) ? "acquired" : "refused";
  } catch (error) {
    return error instanceof Error ? error.name : String(error);
  }
}

/** Checks a step's optional `elapsed_ms: [lo, hi]` against the time since `started`. */
function checkElapsed(step: Obj, started: number): void {
  if (step["elapsed_ms"] !== undefined) {
    const elapsed = performance.now() - started;
    const [lo, hi] = step["elapsed_ms"] as [number, number];
    assert.ok(elapsed >= lo && elapsed <= hi, `took ${elapsed.toFixed(0)} ms, not within [${lo}, ${hi}]`);
  }
}

/** A step's integer field (`permits`, `count`), or its default when absent. */
function integer(step: Obj, field: string, fallback?: number): number {
  const value = step[field] ?? fallback;
  assert.ok(typeof value === "number" && Number.isInteger(value), `${field} must be an integer, not ${JSON.stringify(value)}`);
  return value;
}

/**
 * The semaphore's and the latch's steps that call one method: the step's
 * fields besides its action, and the call (its result compared with
 * `expect` when that is a field).
 */
const CALLS: Record<string, { fields: string[]; run: (run: Run, step: Obj, target: Json | undefined) => Promise<unknown> }> = {
  try_set_permits: { fields: ["permits", "expect"], run: (r, s, t) => r.counted(t).trySetPermits(integer(s, "permits")) },
  add_permits: { fields: ["permits"], run: (r, s, t) => r.counted(t).addPermits(integer(s, "permits")) },
  available: { fields: ["expect"], run: (r, _, t) => r.counted(t).availablePermits() },
  drain: { fields: ["expect"], run: (r, _, t) => r.semaphore(t).drainPermits() },
  try_set_count: { fields: ["count", "expect"], run: (r, s, t) => r.latch(t).trySetCount(integer(s, "count")) },
  count_down: { fields: [], run: (r, _, t) => r.latch(t).countDown() },
  count: { fields: ["expect"], run: (r, _, t) => r.latch(t).getCount() },
  delete: { fields: ["expect"], run: (r, _, t) => r.latch(t).delete() },
  update_lease: { fields: ["ids", "lease_ms", "expect"], run: (r, s, t) => r.permit(t).updateLeaseTime(r.oneId(s), integer(s, "lease_ms")) },
  lease_left: { fields: ["ids", "expect"], run: (r, s, t) => r.permit(t).leaseTime(r.oneId(s)) },
  acquired: { fields: ["expect"], run: (r, _, t) => r.permit(t).acquiredPermits() },
};

/** Every step's action (clients/contract/README.md). */
const ACTIONS = ["acquire", "release", "held", "lost", "token", "redis", "later", "sleep_ms", "calls", "reset_calls", "await", ...Object.keys(CALLS)];

/** What one scenario has running: its clients, locks, semaphores, latches, saved values and `later` steps. */
class Run {
  readonly saved = new Map<string, unknown>();
  readonly locks = new Map<string, Lock>();
  readonly semaphores = new Map<string, Semaphore>();
  readonly permits = new Map<string, PermitExpirableSemaphore>();
  readonly latches = new Map<string, CountDownLatch>();
  readonly clients = new Map<string, Client>();
  readonly connections: Redis[] = [];
  readonly later: Promise<void>[] = [];

  constructor(
    readonly server: Server,
    readonly raw: Redis,
  ) {}

  /** `$owner(L)` inside an argument, or a whole `$v` saved name, replaced. */
  substitute(arg: Json): string {
    if (typeof arg !== "string") {
      throw new assert.AssertionError({ message: `redis arguments are strings, not ${JSON.stringify(arg)}` });
    }
    const text = arg.replace(/\$owner\(([^)]+)\)/g, (_, name: string) => this.lock(name).owner);
    if (text.startsWith("$") && this.saved.has(text.slice(1))) {
      return String(this.saved.get(text.slice(1)));
    }
    return text;
  }

  lock(name: Json | undefined): Lock {
    const found = typeof name === "string" ? this.locks.get(name) : undefined;
    assert.ok(found !== undefined, `no lock ${JSON.stringify(name)} in the scenario`);
    return found;
  }

  semaphore(name: Json | undefined): Semaphore {
    const found = typeof name === "string" ? this.semaphores.get(name) : undefined;
    assert.ok(found !== undefined, `no semaphore ${JSON.stringify(name)} in the scenario`);
    return found;
  }

  permit(name: Json | undefined): PermitExpirableSemaphore {
    const found = typeof name === "string" ? this.permits.get(name) : undefined;
    assert.ok(found !== undefined, `no permit semaphore ${JSON.stringify(name)} in the scenario`);
    return found;
  }

  /** The semaphore or the permit semaphore `name`: the steps both kinds take. */
  counted(name: Json | undefined): Semaphore | PermitExpirableSemaphore {
    return typeof name === "string" && this.permits.has(name) ? this.permit(name) : this.semaphore(name);
  }

  /** The ids an acquisition saved under a step's `ids`. */
  ids(step: Obj): string[] {
    const name = step["ids"];
    assert.ok(typeof name === "string" && this.saved.has(name), `no ids saved as ${JSON.stringify(name)}`);
    const ids = this.saved.get(name);
    assert.ok(Array.isArray(ids), `${name} holds no ids: ${JSON.stringify(ids)}`);
    return ids as string[];
  }

  /** The one id saved under a step's `ids`. */
  oneId(step: Obj): string {
    const ids = this.ids(step);
    assert.equal(ids.length, 1, `${String(step["ids"])} holds ${ids.length} ids, not one`);
    return ids[0]!;
  }

  latch(name: Json | undefined): CountDownLatch {
    const found = typeof name === "string" ? this.latches.get(name) : undefined;
    assert.ok(found !== undefined, `no latch ${JSON.stringify(name)} in the scenario`);
    return found;
  }

  savedValue(reference: Json): unknown {
    assert.ok(typeof reference === "string" && reference.startsWith("$"), `not a saved value: ${JSON.stringify(reference)}`);
    const name = reference.slice(1);
    assert.ok(this.saved.has(name), `nothing saved as ${name}`);
    return this.saved.get(name);
  }

  /** Whether `actual` is what `expected` says (README "Expected values"). */
  check(actual: unknown, expected: Json, what: string): void {
    if (!isObj(expected)) {
      assert.deepEqual(actual, expected, what);
      return;
    }
    const keys = Object.keys(expected);
    assert.equal(keys.length, 1, `${what}: an expectation has one key: ${JSON.stringify(expected)}`);
    const key = keys[0]!;
    const value = expected[key]!;
    switch (key) {
      case "between": {
        assert.ok(Array.isArray(value) && value.length === 2, `${what}: between takes [lo, hi]`);
        const n = bigOf(actual, what);
        assert.ok(n >= BigInt(value[0] as number) && n <= BigInt(value[1] as number), `${what}: ${n} not in [${String(value)}]`);
        return;
      }
      case "match":
        assert.ok(typeof actual === "string", `${what}: ${JSON.stringify(actual)} is not a string`);
        assert.match(actual, new RegExp(`^(?:${String(value)})$`), what);
        return;
      case "each_match":
        assert.ok(Array.isArray(actual), `${what}: ${JSON.stringify(actual)} is not an array`);
        for (const item of actual) {
          assert.match(String(item), new RegExp(`^(?:${String(value)})$`), what);
        }
        return;
      case "len":
        assert.ok(Array.isArray(actual), `${what}: ${JSON.stringify(actual)} is not an array`);
        assert.equal(actual.length, value, what);
        return;
      case "gt":
        assert.ok(bigOf(actual, what) > bigOf(this.savedValue(value), what), `${what}: ${String(actual)} not > ${String(this.savedValue(value))}`);
        return;
      case "eq":
        assert.equal(bigOf(actual, what), bigOf(this.savedValue(value), what), what);
        return;
      case "error":
        assert.ok(actual instanceof Error && actual.name === "ReplyError", `${what}: ${JSON.stringify(actual)} is not an error reply`);
        assert.ok(actual.message.startsWith(String(value)), `${what}: ${actual.message} does not start with ${String(value)}`);
        return;
      default:
        assert.fail(`${what}: unknown expectation ${JSON.stringify(key)}`);
    }
  }

  /** A raw command's reply, or its error reply. */
  async command(connection: Redis, args: Json): Promise<unknown> {
    assert.ok(Array.isArray(args) && args.length > 0, `redis takes [command, args…], not ${JSON.stringify(args)}`);
    const [name, ...rest] = args.map((a) => this.substitute(a));
    try {
      return await connection.call(name!, ...rest);
    } catch (error) {
      if (error instanceof Error && error.name === "ReplyError") {
        return error;
      }
      throw error;
    }
  }

  async calls(expected: Json): Promise<void> {
    assert.ok(isObj(expected), "calls takes an object");
    const stats = await this.raw.info("commandstats");
    for (const [command, want] of Object.entries(expected)) {
      const line = stats.split(/\r?\n/).find((l) => l.startsWith(`cmdstat_${command}:`));
      const calls = line === undefined ? 0 : Number(/calls=(\d+)/.exec(line)?.[1] ?? "0");
      this.check(calls, want, `calls of ${command}`);
    }
  }

  async step(step: Obj): Promise<void> {
    // `count` is an action of its own and a field of `try_set_count`.
    const actions = Object.keys(step).filter((k) => ACTIONS.includes(k) && !(k === "count" && "try_set_count" in step));
    assert.equal(actions.length, 1, `a step has exactly one action: ${JSON.stringify(step)}`);
    const action = actions[0]!;
    const call = CALLS[action];
    if (call !== undefined) {
      onlyFields(action, step, [action, ...call.fields]);
      const result = await call.run(this, step, step[action]);
      if (call.fields.includes("expect")) {
        this.check(result, step["expect"]!, action);
      }
      return;
    }
    switch (action) {
      case "acquire": {
        if (typeof step["acquire"] === "string" && this.permits.has(step["acquire"])) {
          onlyFields("acquire", step, ["acquire", "permits", "lease_ms", "wait_ms", "expect", "elapsed_ms", "save_ids"]);
          assert.ok("wait_ms" in step && "lease_ms" in step && "expect" in step, "a permit acquire needs lease_ms, wait_ms and expect");
          const permit = this.permit(step["acquire"]);
          const permits = integer(step, "permits", 1);
          const started = performance.now();
          let ids: string[] | null = null;
          const outcome = await outcomeOf(async () => {
            ids = await permit.acquire({ permits, lease: step["lease_ms"] as number | null, wait: step["wait_ms"] as number | null });
            return ids !== null;
          });
          assert.equal(outcome, step["expect"], "the acquisition's outcome");
          checkElapsed(step, started);
          if (ids !== null) {
            const taken: string[] = ids;
            assert.equal(taken.length, permits, "one id per permit");
            for (const id of taken) {
              assert.match(id, /^[0-9a-f]+$/, "a permit id is hex");
            }
          }
          if (step["save_ids"] !== undefined) {
            this.saved.set(String(step["save_ids"]), ids);
          }
          return;
        }
        if (typeof step["acquire"] === "string" && this.semaphores.has(step["acquire"])) {
          onlyFields("acquire", step, ["acquire", "permits", "wait_ms", "expect", "elapsed_ms"]);
          assert.ok("wait_ms" in step && "expect" in step, "a semaphore's acquire needs wait_ms and expect");
          const semaphore = this.semaphore(step["acquire"]);
          const permits = integer(step, "permits", 1);
          const started = performance.now();
          const outcome = await outcomeOf(() => semaphore.acquire({ permits, wait: step["wait_ms"] as number | null }));
          assert.equal(outcome, step["expect"], "the acquisition's outcome");
          checkElapsed(step, started);
          return;
        }
        onlyFields("acquire", step, ["acquire", "wait_ms", "lease_ms", "expect", "elapsed_ms", "save_token"]);
        assert.ok("wait_ms" in step && "lease_ms" in step && "expect" in step, "acquire needs wait_ms, lease_ms and expect");
        const lock = this.lock(step["acquire"]);
        const started = performance.now();
        const outcome = await outcomeOf(() => lock.acquire({ wait: step["wait_ms"] as number | null, lease: step["lease_ms"] as number | null }));
        assert.equal(outcome, step["expect"], "the acquisition's outcome");
        checkElapsed(step, started);
        if (step["save_token"] !== undefined) {
          this.saved.set(String(step["save_token"]), lock.token);
        }
        return;
      }
      case "release": {
        if (typeof step["release"] === "string" && this.permits.has(step["release"])) {
          onlyFields("release", step, ["release", "ids", "expect"]);
          const permit = this.permit(step["release"]);
          let outcome = "ok";
          try {
            await permit.release(this.ids(step));
          } catch (error) {
            outcome = error instanceof Error ? error.name : String(error);
          }
          assert.equal(outcome, step["expect"], "the release's outcome");
          return;
        }
        const semaphore = typeof step["release"] === "string" ? this.semaphores.get(step["release"]) : undefined;
        onlyFields("release", step, semaphore === undefined ? ["release", "expect"] : ["release", "permits", "expect"]);
        let outcome = "ok";
        try {
          await (semaphore === undefined ? this.lock(step["release"]).release() : semaphore.release(integer(step, "permits", 1)));
        } catch (error) {
          outcome = error instanceof Error ? error.name : String(error);
        }
        assert.equal(outcome, step["expect"], "the release's outcome");
        return;
      }
      case "await": {
        onlyFields(action, step, [action, "wait_ms", "expect", "elapsed_ms"]);
        assert.ok("wait_ms" in step && "expect" in step, "await needs wait_ms and expect");
        const latch = this.latch(step[action]);
        const started = performance.now();
        assert.equal(await latch.await({ wait: step["wait_ms"] as number | null }), step["expect"], "the wait's outcome");
        checkElapsed(step, started);
        return;
      }
      case "held":
      case "lost": {
        onlyFields(action, step, [action, "expect", "within_ms"]);
        const lock = this.lock(step[action]);
        const view = (): boolean => (action === "held" ? lock.held : lock.lost);
        // within_ms: what the watchdog finds in the background, polled until it is as expected.
        const deadline = performance.now() + ((step["within_ms"] as number | undefined) ?? 0);
        while (view() !== step["expect"] && performance.now() < deadline) {
          await sleep(10);
        }
        assert.equal(view(), step["expect"], `${action} (within ${String(step["within_ms"] ?? 0)} ms)`);
        return;
      }
      case "token":
        onlyFields("token", step, ["token", "expect"]);
        this.check(this.lock(step["token"]).token, step["expect"]!, "token");
        return;
      case "redis": {
        onlyFields("redis", step, ["redis", "expect", "save"]);
        const reply = await this.command(this.raw, step["redis"]!);
        if (step["expect"] !== undefined) {
          this.check(reply, step["expect"], `reply to ${JSON.stringify(step["redis"])}`);
        }
        if (step["save"] !== undefined) {
          this.saved.set(String(step["save"]), reply);
        }
        return;
      }
      case "later": {
        onlyFields("later", step, ["later"]);
        const later = step["later"];
        assert.ok(isObj(later), "later takes an object");
        onlyFields("later", later, ["after_ms", "redis", "expect"]);
        const connection = this.server.client();
        this.connections.push(connection);
        const args = later["redis"]!;
        this.later.push(
          (async () => {
            await sleep(later["after_ms"] as number);
            const reply = await this.command(connection, args);
            this.check(reply, later["expect"]!, `later reply to ${JSON.stringify(args)}`);
          })(),
        );
        return;
      }
      case "sleep_ms":
        onlyFields("sleep_ms", step, ["sleep_ms"]);
        await sleep(step["sleep_ms"] as number);
        return;
      case "calls":
        onlyFields("calls", step, ["calls"]);
        await this.calls(step["calls"]!);
        return;
      case "reset_calls":
        onlyFields("reset_calls", step, ["reset_calls"]);
        await this.raw.call("CONFIG", "RESETSTAT");
        return;
      default:
        assert.fail(`unknown step ${action}`);
    }
  }

  /** Builds the scenario's client objects and locks. */
  build(scenario: Obj): void {
    const clients = scenario["clients"];
    const locks = scenario["locks"];
    assert.ok(isObj(clients) && isObj(locks), "a scenario has clients and locks");
    for (const [name, options] of Object.entries(clients)) {
      assert.ok(isObj(options), `client ${name}`);
      onlyFields(`client ${name}`, options, ["watchdog_timeout_ms", "socket_timeout_ms"]);
      const timeout = options["socket_timeout_ms"];
      const connection = this.server.client(typeof timeout === "number" ? { commandTimeout: timeout } : {});
      this.connections.push(connection);
      const watchdog = options["watchdog_timeout_ms"];
      this.clients.set(name, new Client(connection, typeof watchdog === "number" ? { watchdogTimeout: watchdog } : {}));
    }
    const rwlocks = new Map<string, ReadWriteLock>();
    for (const [name, spec] of Object.entries(locks)) {
      assert.ok(isObj(spec), `lock ${name}`);
      onlyFields(`lock ${name}`, spec, ["client", "kind", "name", "session", "holds"]);
      const client = this.clients.get(String(spec["client"]));
      assert.ok(client !== undefined, `lock ${name}: no client ${JSON.stringify(spec["client"])}`);
      const session = spec["session"] === true;
      const lockName = String(spec["name"]);
      if (spec["kind"] === "semaphore" || spec["kind"] === "permit" || spec["kind"] === "latch") {
        onlyFields(`lock ${name}`, spec, ["client", "kind", "name", "session"]);
        assert.ok(!session, `lock ${name}: a ${spec["kind"]} takes no session holds`);
        if (spec["kind"] === "semaphore") {
          this.semaphores.set(name, client.semaphore(lockName));
        } else if (spec["kind"] === "permit") {
          this.permits.set(name, client.permitExpirableSemaphore(lockName));
        } else {
          this.latches.set(name, client.countDownLatch(lockName));
        }
        continue;
      }
      let lock: Lock;
      switch (spec["kind"]) {
        case "plain":
          lock = client.lock(lockName, { session });
          break;
        case "fenced":
          lock = client.lock(lockName, { session, fenced: true });
          break;
        case "nonreentrant":
          lock = client.lock(lockName, { session, reentrant: false });
          break;
        case "fair":
          assert.ok(!session, `lock ${name}: a fair lock takes no session holds`);
          lock = client.fairLock(lockName);
          break;
        case "read":
        case "write": {
          const key = `${String(spec["client"])}\u0000${lockName}\u0000${session}`;
          let rw = rwlocks.get(key);
          if (rw === undefined) {
            rw = client.readWriteLock(lockName, { session });
            rwlocks.set(key, rw);
          }
          lock = spec["kind"] === "read" ? rw.readLock() : rw.writeLock();
          break;
        }
        case "multi": {
          const holds = spec["holds"];
          assert.ok(Array.isArray(holds), `lock ${name}: multi needs holds`);
          lock = client.multiLock(holds.map((h) => {
            assert.ok(Array.isArray(h) && h.length === 2, `lock ${name}: a hold is [kind, name]`);
            return [String(h[0]) as "LOCK" | "READ" | "WRITE", String(h[1])] as const;
          }), { session });
          break;
        }
        default:
          assert.fail(`lock ${name}: unknown kind ${JSON.stringify(spec["kind"])}`);
      }
      this.locks.set(name, lock);
    }
  }

  async close(): Promise<void> {
    await Promise.allSettled(this.later);
    for (const client of this.clients.values()) {
      await client.close();
    }
    for (const connection of this.connections) {
      connection.disconnect();
    }
  }
}

describe("shared scenarios (clients/contract/scenarios.json)", () => {
  let server: Server;
  let raw: Redis;

  before(async () => {
    server = await Server.start();
    raw = server.client();
  });

  after(async () => {
    await server.stop();
  });

  for (const scenario of scenarios) {
    it(String(scenario["name"]), async () => {
      onlyFields(`scenario ${String(scenario["name"])}`, scenario, ["name", "clients", "locks", "steps"]);
      await raw.flushall();
      await raw.call("CONFIG", "RESETSTAT");
      const run = new Run(server, raw);
      try {
        run.build(scenario);
        const steps = scenario["steps"];
        assert.ok(Array.isArray(steps), "a scenario has steps");
        for (const [index, step] of steps.entries()) {
          try {
            assert.ok(isObj(step), "a step is an object");
            await run.step(step);
          } catch (error) {
            const message = error instanceof Error ? error.message : String(error);
            throw new Error(`step ${index} ${JSON.stringify(step)}: ${message}`, { cause: error });
          }
        }
        const results = await Promise.allSettled(run.later);
        for (const result of results) {
          if (result.status === "rejected") {
            throw new Error(`a later step: ${String(result.reason)}`, { cause: result.reason });
          }
        }
      } finally {
        await run.close();
      }
    });
  }
});
