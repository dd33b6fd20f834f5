/**
 * Real servers for the tests: redis-server processes with the module, on
 * free 127.0.0.1 ports, each in a temp dir, each stopped by its own PID.
 *
 * RWLOCK_REDIS_SERVER: the server binary (default `redis-server` on PATH).
 * RWLOCK_MODULE: the module (default the repository's
 * target/release/librwlock.so). A missing one fails the tests, never skips.
 */

import { spawn, type ChildProcess } from "node:child_process";
import { after, before, beforeEach } from "node:test";
import { existsSync, mkdtempSync, readFileSync, rmSync, openSync, closeSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, resolve } from "node:path";
import { setTimeout as sleep } from "node:timers/promises";
import { Redis, type RedisOptions } from "ioredis";
import { Client } from "../src/index";

/** The repository's root (this file runs from clients/node/build-test/test/). */
export const REPO = resolve(__dirname, "../../../..");

/** The package's directory, clients/node. */
export const PACKAGE = resolve(__dirname, "../..");

const START_TIMEOUT_MS = 10_000;
const STOP_TIMEOUT_MS = 5_000;

/** The server binary. */
export function serverBinary(): string {
  return process.env["RWLOCK_REDIS_SERVER"] || "redis-server";
}

/** The module; throws (fails the test) when it is missing. */
export function modulePath(): string {
  const path = process.env["RWLOCK_MODULE"] || join(REPO, "target/release/librwlock.so");
  if (!existsSync(path)) {
    throw new Error(`no module at ${path}: cargo build --release, or set RWLOCK_MODULE`);
  }
  return path;
}

function portFree(port: number): Promise<boolean> {
  return new Promise((done) => {
    const server = createServer();
    server.once("error", () => done(false));
    server.listen(port, "127.0.0.1", () => server.close(() => done(true)));
  });
}

/** A port free now (and, with `alsoFree`, port + alsoFree too: the cluster bus). */
export async function freePort(alsoFree = 0): Promise<number> {
  for (let i = 0; i < 100; i++) {
    const port = await new Promise<number>((done, fail) => {
      const server = createServer();
      server.once("error", fail);
      server.listen(0, "127.0.0.1", () => {
        const address = server.address();
        const found = typeof address === "object" && address !== null ? address.port : 0;
        server.close(() => done(found));
      });
    });
    if (alsoFree === 0) {
      return port;
    }
    if (port + alsoFree <= 65535 && (await portFree(port + alsoFree))) {
      return port;
    }
  }
  throw new Error("no free port");
}

/** One redis-server with the module, in its own directory. */
export class Server {
  private process: ChildProcess | null = null;
  private readonly clients: Redis[] = [];

  private constructor(
    readonly port: number,
    readonly dir: string,
  ) {}

  /** Starts one (`args`: more server options; `cluster`: cluster-enabled). */
  static async start(args: string[] = [], cluster = false): Promise<Server> {
    const dir = mkdtempSync(join(tmpdir(), "rwlock-node-"));
    const port = await freePort(cluster ? 10_000 : 0);
    const argv = [
      "--port", String(port),
      "--bind", "127.0.0.1",
      "--dir", dir,
      "--save", "",
      "--appendonly", "no",
      "--loadmodule", modulePath(),
    ];
    if (cluster) {
      argv.push("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf");
    }
    argv.push(...args);
    const server = new Server(port, dir);
    const log = openSync(join(dir, "server.log"), "w");
    server.process = spawn(serverBinary(), argv, { stdio: ["ignore", log, log] });
    closeSync(log);
    const probe = server.client({ lazyConnect: true, retryStrategy: () => null, enableOfflineQueue: false });
    const deadline = Date.now() + START_TIMEOUT_MS;
    for (;;) {
      try {
        await probe.connect();
        await probe.ping();
        break;
      } catch {
        probe.disconnect();
      }
      if (server.process.exitCode !== null || Date.now() > deadline) {
        const log = server.log();
        await server.stop();
        throw new Error(`redis-server did not start: ${log}`);
      }
      await sleep(20);
    }
    return server;
  }

  /** A client of the test's own, closed with the server. */
  client(options: RedisOptions = {}): Redis {
    const client = new Redis({ host: "127.0.0.1", port: this.port, commandTimeout: 10_000, ...options });
    client.on("error", () => undefined);
    this.clients.push(client);
    return client;
  }

  /** The server's log (its end). */
  log(): string {
    try {
      return readFileSync(join(this.dir, "server.log"), "utf8").slice(-4000);
    } catch {
      return "";
    }
  }

  /** The PID, for SIGSTOP/SIGCONT. */
  get pid(): number {
    if (this.process?.pid === undefined) {
      throw new Error("the server is not running");
    }
    return this.process.pid;
  }

  /** Whether the process still runs. */
  get running(): boolean {
    return this.process !== null && this.process.exitCode === null && this.process.signalCode === null;
  }

  /** SIGSTOP: the server freezes (its connections stay open). */
  pause(): void {
    process.kill(this.pid, "SIGSTOP");
  }

  /** SIGCONT. */
  resume(): void {
    process.kill(this.pid, "SIGCONT");
  }

  /** By PID: SIGCONT (it may be paused), SIGTERM, SIGKILL if it lingers; then its directory goes. */
  async stop(): Promise<void> {
    for (const client of this.clients.splice(0)) {
      client.disconnect();
    }
    const child = this.process;
    this.process = null;
    if (child !== null && child.exitCode === null && child.signalCode === null && child.pid !== undefined) {
      const exited = new Promise<void>((done) => child.once("exit", () => done()));
      try {
        process.kill(child.pid, "SIGCONT");
        child.kill("SIGTERM");
      } catch {
        // already gone
      }
      const cancel = new AbortController();
      const late = sleep(STOP_TIMEOUT_MS, "late" as const, { signal: cancel.signal }).catch(() => "exited" as const);
      const outcome = await Promise.race([exited.then(() => "exited" as const), late]);
      cancel.abort(); // the timer must not keep the test process alive
      if (outcome === "late") {
        child.kill("SIGKILL");
        await exited;
      }
    }
    rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Polls `condition` until true, failing after `timeoutMs`. */
export async function waitUntil(what: string, condition: () => Promise<boolean> | boolean, timeoutMs = 15_000): Promise<void> {
  const deadline = Date.now() + timeoutMs;
  while (!(await condition())) {
    if (Date.now() > deadline) {
      throw new Error(`timed out waiting for ${what}`);
    }
    await sleep(50);
  }
}

/**
 * Whether a replica acknowledges what this master streams now. A replica reports its link up once
 * it has loaded the master's data, but after a diskless sync the master streams to it only from its
 * first acknowledgement, up to a second later: a WAIT meanwhile lasts that long, and an acquisition
 * on a loaded machine fails with NotSynced. The probe is a PUBLISH (replicated, writing no key) and
 * WAIT on the same connection.
 */
export async function acknowledged(master: Redis): Promise<boolean> {
  await master.publish("__rwlock_test_replica", "probe");
  return Number(await master.call("WAIT", "1", "100")) >= 1;
}

/** One field of an INFO reply. */
export async function infoField(client: Redis, section: string, field: string): Promise<string | undefined> {
  const text = await client.info(section);
  const line = text.split(/\r?\n/).find((l) => l.startsWith(`${field}:`));
  return line?.slice(field.length + 1).trim();
}

const SLOTS = 16384;

/** Three cluster-enabled masters with the module, slots split evenly, converged. */
export async function startCluster(): Promise<Server[]> {
  const nodes = await Promise.all([0, 1, 2].map(() => Server.start([], true)));
  try {
    for (const [i, node] of nodes.entries()) {
      const first = Math.floor((i * SLOTS) / 3);
      const last = Math.floor(((i + 1) * SLOTS) / 3) - 1;
      await node.client().call("CLUSTER", "ADDSLOTSRANGE", first, last);
    }
    for (const node of nodes.slice(1)) {
      await nodes[0]!.client().call("CLUSTER", "MEET", "127.0.0.1", node.port);
    }
    await waitUntil(
      "the cluster to converge",
      async () => {
        for (const node of nodes) {
          const info = String(await node.client().call("CLUSTER", "INFO"));
          if (!info.includes("cluster_state:ok") || !info.includes("cluster_known_nodes:3")) {
            return false;
          }
        }
        return true;
      },
      30_000,
    );
    return nodes;
  } catch (error) {
    await Promise.all(nodes.map((n) => n.stop()));
    throw error;
  }
}

/**
 * One server for a suite's tests (called inside `describe`): started before
 * them, flushed before each, stopped after; `server` and `redis` (a client
 * of it) are set while the tests run.
 */
export function suiteServer(): { readonly server: Server; readonly redis: Redis } {
  const state = {} as { server: Server; redis: Redis };
  before(async () => {
    state.server = await Server.start();
    state.redis = state.server.client();
  });
  beforeEach(async () => {
    await state.redis.flushall();
  });
  after(async () => {
    await state.server.stop();
  });
  return state;
}

/** Runs `body` with `n` client objects, each on a connection of its own to `server`, all closed after. */
export async function withClients(server: Server, n: number, body: (clients: Client[]) => Promise<void>): Promise<void> {
  const clients = Array.from({ length: n }, () => new Client(server.client()));
  try {
    await body(clients);
  } finally {
    await Promise.all(clients.map((client) => client.close()));
  }
}

/**
 * Two workers per client object, one taking 1 permit and one 2, each
 * `rounds` times through `withPermits(client, permits, body)` (the kind's
 * own `withPermits`, which runs `body` holding them): counts the permits in
 * use meanwhile. Resolves how many times more than `count` were in use,
 * and how many bodies ran.
 */
export async function contend(clients: Client[], count: number, rounds: number, withPermits: (client: Client, permits: number, body: () => Promise<void>) => Promise<void>): Promise<{ violations: number; cycles: number }> {
  let inUse = 0;
  let violations = 0;
  let cycles = 0;
  const worker = async (client: Client, permits: number): Promise<void> => {
    for (let i = 0; i < rounds; i++) {
      await withPermits(client, permits, async () => {
        inUse += permits;
        if (inUse > count) {
          violations += 1;
        }
        await sleep(2); // others run meanwhile
        inUse -= permits;
        cycles += 1;
      });
    }
  };
  await Promise.all(clients.flatMap((client) => [worker(client, 1), worker(client, 2)]));
  return { violations, cycles };
}
