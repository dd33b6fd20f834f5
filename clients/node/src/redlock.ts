/**
 * `RedLock`: the Redlock algorithm over several independent masters.
 *
 * Read this before using it. Redisson deprecated its `RedissonRedLock` in
 * 3.12.5: after Martin Kleppmann's analysis ("How to do distributed
 * locking", 2016), a lease-based lock cannot by itself stop a holder that
 * paused (GC, swapping, a network delay) past its lease from acting after
 * the next holder started, and Redlock's safety further rests on bounded
 * clock drift and pauses across the nodes and the client, which real
 * systems do not guarantee; a node that restarts without its data can grant
 * the same lock twice. Redlock adds availability (a minority of nodes may be
 * down), not correctness. When correctness matters, use one fenced lock
 * (`locks.fencedLock(name)`) on a master with replicas (replica sync on),
 * and have the storage refuse writes carrying an older token.
 */

import type { Redis } from "ioredis";
import { asyncDispose } from "./dispose";
import { Target } from "./commands";
import { NotAcquired, NotHeld } from "./errors";
import { toMs } from "./options";
import { clientIdOf, Owners } from "./owner";

/** A RedLock's options. */
export interface RedLockOptions {
  /** Milliseconds each node has to connect and answer (no retry); 100. */
  nodeTimeout?: number;
  /** The upper bound (ms) of the random pause between attempts; 200. */
  retryDelay?: number;
  /** The client UUID of its owner; default a random UUID v4. */
  clientId?: string;
}

/** A RedLock acquisition's options. */
export interface RedLockAcquireOptions {
  /** Milliseconds to keep trying (attempts with random pauses); 0 (the default): one attempt. */
  wait?: number;
  /** Milliseconds the hold lasts on each node; 30000. No watchdog: pick one longer than the work. */
  lease?: number;
  /** Aborting it stops the attempts: rejects with `signal.reason`, nothing held. */
  signal?: AbortSignal;
}

/** The majority of `nodes`. */
export function quorum(nodes: number): number {
  return Math.floor(nodes / 2) + 1;
}

/** The Redlock paper's allowance for clock drift between the nodes: 1% of the lease + 2 ms. */
export function drift(leaseMs: number): number {
  return leaseMs * 0.01 + 2;
}

/**
 * The Redlock algorithm over `clients`, independent masters with the
 * module (not one cluster's nodes, nor a master and its replicas), through
 * connections of its own (each client's options, but `nodeTimeout` and no
 * retry). Deprecated by Redisson since 3.12.5 (see this module's notes):
 * prefer a fenced lock.
 */
export class RedLock implements AsyncDisposable {
  /** The owner it sends on every node, `<clientId>:1`. */
  readonly owner: string;
  private readonly nodeTimeout: number;
  private readonly retryDelay: number;
  private readonly conns: (Redis | null)[];
  private readonly target: Target;
  private until = 0;
  private leaseMs = 0;

  /** `clients`: one ioredis `Redis` per master; `name`: the lock (a plain lock, `LOCK.*`, on each). */
  constructor(
    private readonly clients: readonly Redis[],
    readonly name: string,
    options: RedLockOptions = {},
  ) {
    if (clients.length === 0) {
      throw new RangeError("a RedLock needs at least one node");
    }
    this.nodeTimeout = toMs(options.nodeTimeout ?? 100, "nodeTimeout");
    this.retryDelay = toMs(options.retryDelay ?? 200, "retryDelay");
    this.owner = new Owners(clientIdOf(options.clientId)).create();
    this.target = new Target([["LOCK", name]], false);
    this.conns = clients.map(() => null);
  }

  /** A connection of its own to node `i`, opened again after it failed. */
  private conn(i: number): Redis {
    const found = this.conns[i];
    if (found != null && found.status !== "end" && found.status !== "close") {
      return found;
    }
    found?.disconnect();
    const conn = this.clients[i]!.duplicate({
      connectTimeout: this.nodeTimeout,
      commandTimeout: this.nodeTimeout,
      socketTimeout: undefined,
      // A node down or slow must not hold up the others: no retry.
      retryStrategy: () => null,
      maxRetriesPerRequest: 0,
      autoResendUnfulfilledCommands: false,
      enableOfflineQueue: true,
      lazyConnect: false,
    });
    conn.on("error", () => undefined); // a node's failure is a "no" from it
    this.conns[i] = conn;
    return conn;
  }

  /**
   * Waits (at most `nodeTimeout`) for node `i`'s connection to be ready, so
   * that connecting is not counted against the lease: the attempt's clock
   * starts when the acquisitions are sent. A node that does not connect in
   * time is a "no" in the attempt that follows.
   */
  private ready(i: number): Promise<void> {
    const conn = this.conn(i);
    if (conn.status === "ready") {
      return Promise.resolve();
    }
    return new Promise((resolve) => {
      const done = (): void => {
        clearTimeout(timer);
        conn.off("ready", done).off("end", done).off("close", done);
        resolve();
      };
      const timer = setTimeout(done, this.nodeTimeout);
      conn.once("ready", done).once("end", done).once("close", done);
    });
  }

  private async onNode(i: number, args: [string, ...(string | number)[]]): Promise<unknown> {
    return this.conn(i).call(...args);
  }

  /** Whether node `i` granted the lock (any error is a no). */
  private async tryNode(i: number, leaseMs: number): Promise<boolean> {
    try {
      const reply = await this.onNode(i, this.target.acquire(this.owner, leaseMs, null, false));
      return this.target.outcome(reply).acquired;
    } catch {
      return false;
    }
  }

  /** Releases on every node; how many held it. */
  private async releaseAll(): Promise<number> {
    const replies = await Promise.all(
      this.clients.map(async (_, i) => {
        try {
          return this.target.released(await this.onNode(i, this.target.release(this.owner, this.leaseMs || 1, null)));
        } catch {
          return null;
        }
      }),
    );
    return replies.filter((r) => r !== null).length;
  }

  /**
   * Takes the lock on every node at once, each bounded by `nodeTimeout`;
   * held when a majority said yes with validity left (validity = lease −
   * elapsed − drift). Otherwise releases everywhere and tries again after
   * a random pause until `wait` runs out. Resolves the validity in ms, or
   * null (nothing left held on any node).
   */
  async acquire(options: RedLockAcquireOptions = {}): Promise<number | null> {
    const leaseMs = toMs(options.lease ?? 30_000, "lease");
    const wait = options.wait ?? 0;
    if (wait !== 0) {
      toMs(wait, "wait");
    }
    const signal = options.signal;
    const deadline = performance.now() + wait;
    this.leaseMs = leaseMs;
    for (;;) {
      signal?.throwIfAborted();
      await Promise.all(this.clients.map((_, i) => this.ready(i)));
      const start = performance.now();
      const granted = (await Promise.all(this.clients.map((_, i) => this.tryNode(i, leaseMs)))).filter(Boolean).length;
      const validity = leaseMs - (performance.now() - start) - drift(leaseMs);
      if (granted >= quorum(this.clients.length) && validity > 0 && !signal?.aborted) {
        this.until = start + validity;
        return validity;
      }
      await this.releaseAll();
      signal?.throwIfAborted();
      const pause = Math.random() * this.retryDelay;
      if (performance.now() + pause >= deadline) {
        return null;
      }
      await sleep(pause, signal);
    }
  }

  /** `acquire`, rejecting with `NotAcquired` when it fails; the hold's validity and release, for `await using`. */
  async hold(options: RedLockAcquireOptions = {}): Promise<{ validity: number; release(): Promise<number> } & AsyncDisposable> {
    const validity = await this.acquire(options);
    if (validity === null) {
      throw new NotAcquired(this.name, null);
    }
    let done: Promise<number> | null = null;
    const release = (): Promise<number> => (done ??= this.release());
    return { validity, release, [asyncDispose]: async () => void (await release()) };
  }

  /** Milliseconds the current hold has left (0 when none). */
  validity(): number {
    return Math.max(0, this.until - performance.now());
  }

  /** Releases on every node; resolves on how many it was held. Rejects with `NotHeld` when on none. */
  async release(): Promise<number> {
    this.until = 0;
    const released = await this.releaseAll();
    if (released === 0) {
      throw new NotHeld(`${this.name} is not held by ${this.owner} on any node`);
    }
    return released;
  }

  /** Closes its own connections (the clients given stay open). */
  async close(): Promise<void> {
    for (const conn of this.conns) {
      conn?.disconnect();
    }
    this.conns.fill(null);
  }

  /** `await using`: `close()`. */
  [asyncDispose](): Promise<void> {
    return this.close();
  }
}

/** Waits `ms`, or rejects with the signal's reason when it is aborted first. */
function sleep(ms: number, signal: AbortSignal | undefined): Promise<void> {
  return new Promise((resolve, reject) => {
    const onAbort = (): void => {
      clearTimeout(timer);
      reject(signal!.reason);
    };
    const timer = setTimeout(() => {
      signal?.removeEventListener("abort", onAbort);
      resolve();
    }, ms);
    signal?.addEventListener("abort", onAbort, { once: true });
  });
}
