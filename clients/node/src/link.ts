/**
 * The connections a lock object's commands travel on.
 *
 * Commands that never wait on the server (an acquisition's first attempt,
 * releases, renewals, `DEL` of a latch) go on the application's own ioredis
 * connection: in a cluster, on the ioredis connection to the master of the
 * lock name's slot (ioredis cannot route the module's commands by key: it
 * does not know where their keys are). Those of one tick leave in one
 * write (`Links.shared`).
 *
 * An acquisition that waits on the server (`BLOCK`), and any acquisition
 * whose replica check waits (`WAIT`, `WAITAOF`) or binds a session, goes
 * on a *dedicated* connection (a `duplicate()` of that connection, kept in
 * a small pool): a `BLOCK` or `WAIT` holds its connection until the server
 * replies, which on ioredis's one multiplexed connection would stall every
 * other command of the application, and `WAIT` counts the writes of its
 * own connection. The dedicated connection has no command or socket
 * timeout of its own: the reply is waited for as long as the wait plus a
 * margin, so a wait longer than the application's `commandTimeout` works.
 * A session hold keeps its dedicated connection for the hold's life.
 */

import type { Cluster, Redis } from "ioredis";
import calculateSlot from "cluster-key-slot";
import type { Args } from "./commands";

/** A pipelined command's outcome: its reply, or its error (an error reply, or the connection's). */
export type Settled = { readonly error: null; readonly reply: unknown } | { readonly error: Error; readonly reply?: undefined };

/** ioredis's pipeline results as `Settled`s (none: the connection failed before any). */
function settle(results: [Error | null, unknown][] | null): Settled[] {
  return (results ?? []).map(([error, reply]) => (error === null ? { error: null, reply } : { error }));
}

/** An ioredis client: one server (`Redis`) or a Redis Cluster (`Cluster`). */
export type RedisClient = Redis | Cluster;

/** Whether an error is the server's error reply (the command ran, or was refused). */
export function isReplyError(error: unknown): boolean {
  return error instanceof Error && error.name === "ReplyError";
}

/** Whether an error is a cluster's `MOVED` redirection (the slot moved to another master). */
export function isMoved(error: unknown): boolean {
  return isReplyError(error) && (error as Error).message.startsWith("MOVED ");
}

/** A dedicated connection to one master, checked out for an acquisition or a session hold. */
export class Link {
  /** Set once a call failed midway or timed out: the connection is not given back to the pool. */
  broken = false;

  /**
   * `conn`: the dedicated connection; `base`: the application's connection
   * to the same master (sends `CLIENT UNBLOCK`); `node`: `host:port`;
   * `id`: the dedicated connection's `CLIENT ID`, asked for when it opened
   * (pipelined ahead of its first command, so it never waits on a `BLOCK`).
   */
  constructor(
    readonly conn: Redis,
    readonly base: Redis,
    readonly node: string,
    readonly id: Promise<number>,
  ) {}

  /**
   * The connection's `CLIENT ID`, or null when its reply did not come
   * within `waitMs` (the connection stalled: its first reply never came)
   * or the connection failed.
   */
  idWithin(waitMs: number): Promise<number | null> {
    return new Promise((resolve) => {
      const timer = setTimeout(() => resolve(null), waitMs);
      const done = (id: number | null): void => {
        clearTimeout(timer);
        resolve(id);
      };
      this.id.then(done, () => done(null));
    });
  }

  /** Whether the connection can carry another command. */
  get usable(): boolean {
    return !this.broken && (this.conn.status === "ready" || this.conn.status === "connect" || this.conn.status === "connecting");
  }
}

/** How long to wait between two `CLIENT UNBLOCK`s while the command has not reached the server. */
const UNBLOCK_RETRY_MS = 10;

/** How many `CLIENT UNBLOCK`s to try before closing the connection instead. */
const UNBLOCK_TRIES = 20;

/** Idle dedicated connections kept per master. */
const MAX_IDLE = 4;

/** Commands waiting for this tick's write on one of the application's connections, and who waits for their replies. */
interface Queued {
  readonly commands: readonly Args[];
  readonly done: (replies: Settled[]) => void;
  readonly fail: (error: unknown) => void;
}

/** The connections of one client object: the application's, and a pool of dedicated ones per master. */
export class Links {
  private readonly idle = new Map<string, Link[]>();
  private readonly open = new Set<Link>();
  private closed = false;
  // This tick's commands per application connection, written as one
  // ioredis pipeline once the tick's code ran (`flush`).
  private readonly queues = new Map<Redis, Queued[]>();
  // How many times each application connection closed since a release
  // first went there (`closes`), and the listener counting it.
  private readonly closings = new Map<Redis, { count: number; readonly listener: () => void }>();

  /** `client`: the application's ioredis client (never closed by this package). */
  constructor(readonly client: RedisClient) {}

  /** Whether `client` is a Redis Cluster client. */
  get cluster(): boolean {
    return (this.client as { isCluster?: boolean }).isCluster === true;
  }

  /**
   * The application's connection to the master serving `key`: the client
   * itself on one server; in a cluster, its connection to the slot's master.
   */
  async nodeFor(key: string): Promise<Redis> {
    if (!this.cluster) {
      return this.client as Redis;
    }
    const cluster = this.client as Cluster;
    const slot = calculateSlot(key);
    let found = this.masterOf(cluster, slot);
    if (found === undefined) {
      // Not connected yet, or the slot map is stale: a command through the
      // cluster waits for it to be ready, then the map is read again.
      await cluster.ping();
      found = this.masterOf(cluster, slot);
      if (found === undefined) {
        await this.refresh();
        found = this.masterOf(cluster, slot);
      }
    }
    if (found === undefined) {
      throw new Error(`no master serves the slot ${slot} of ${JSON.stringify(key)}`);
    }
    return found;
  }

  private masterOf(cluster: Cluster, slot: number): Redis | undefined {
    const nodeKey = cluster.slots[slot]?.[0];
    if (nodeKey === undefined) {
      return undefined;
    }
    return cluster.nodes("master").find((n) => address(n) === nodeKey);
  }

  /** Re-reads the cluster's slot map (after a `MOVED`). */
  refresh(): Promise<void> {
    if (!this.cluster) {
      return Promise.resolve();
    }
    const cluster = this.client as Cluster;
    return new Promise((resolve, reject) => {
      cluster.refreshSlotsCache((error) => (error ? reject(error) : resolve()));
    });
  }

  /**
   * The application's connection to the master a `MOVED` reply names (the
   * slot map is re-read too, for the commands after): that master itself,
   * not the map's answer, which a refresh already under way may not have
   * updated yet.
   */
  async redirected(error: unknown, key: string): Promise<Redis> {
    const target = (error as Error).message.split(" ")[2];
    await this.refresh();
    const cluster = this.client as Cluster;
    const found = cluster.nodes("all").find((n) => address(n) === target);
    return found ?? this.nodeFor(key);
  }

  /**
   * A short command on the application's connection to the master serving
   * `key`; a `MOVED` reply (a reshard) sends it once more, to the slot's
   * new master.
   */
  async command(key: string, args: Args): Promise<unknown> {
    const node = await this.nodeFor(key);
    try {
      return await node.call(...args);
    } catch (error) {
      if (!this.cluster || !isMoved(error)) {
        throw error;
      }
      return (await this.redirected(error, key)).call(...args);
    }
  }

  /**
   * `commands` in one round trip on the application's connection `base`,
   * written together with every other command this client object sends
   * there in the same tick (one ioredis pipeline, one socket write):
   * concurrent workers' acquisitions and releases leave together, as they
   * would with ioredis's auto-pipelining, which is the application's to
   * choose. Only commands that never wait on the server go here (a `BLOCK`
   * or `WAIT` would hold up the application's other commands). Resolves
   * with every reply (an error reply as its error); rejects when the
   * connection failed before the replies came, or when they did not come
   * within `timeoutMs` (the commands may have run).
   */
  shared(base: Redis, commands: readonly Args[], timeoutMs: number): Promise<Settled[]> {
    if (this.closed) {
      return Promise.reject(new Error("the client object is closed"));
    }
    return new Promise<Settled[]>((resolve, reject) => {
      let settled = false;
      const timer = setTimeout(() => {
        settled = true;
        reject(new Error(`no reply within ${timeoutMs} ms`));
      }, timeoutMs);
      const entry: Queued = {
        commands,
        done: (replies) => {
          if (!settled) {
            settled = true;
            clearTimeout(timer);
            resolve(replies);
          }
        },
        fail: (error) => {
          if (!settled) {
            settled = true;
            clearTimeout(timer);
            reject(error);
          }
        },
      };
      const queue = this.queues.get(base);
      if (queue !== undefined) {
        queue.push(entry);
        return;
      }
      this.queues.set(base, [entry]);
      // After the code of this tick (and its promise jobs) queued what it sends.
      process.nextTick(() => this.flush(base));
    });
  }

  /**
   * Writes the commands queued for `base` as one pipeline (one command
   * alone: as a plain call, without a pipeline's bookkeeping) and hands
   * each caller its replies.
   */
  private flush(base: Redis): void {
    const queue = this.queues.get(base) ?? [];
    this.queues.delete(base);
    const only = queue.length === 1 && queue[0]!.commands.length === 1 ? queue[0]! : null;
    if (only !== null) {
      base.call(...only.commands[0]!).then(
        (reply) => only.done([{ error: null, reply }]),
        (error: unknown) => (isReplyError(error) ? only.done([{ error: error as Error }]) : only.fail(error)),
      );
      return;
    }
    const pipeline = base.pipeline();
    for (const entry of queue) {
      for (const [name, ...args] of entry.commands) {
        pipeline.call(name, ...args);
      }
    }
    pipeline.exec().then(
      (results) => {
        const replies = settle(results);
        let at = 0;
        for (const entry of queue) {
          const own = replies.slice(at, at + entry.commands.length);
          at += entry.commands.length;
          const lost = own.find((r) => r.error !== null && !isReplyError(r.error));
          if (lost !== undefined || own.length !== entry.commands.length) {
            entry.fail(lost?.error ?? new Error("the connection closed"));
          } else {
            entry.done(own);
          }
        }
      },
      (error: unknown) => {
        for (const entry of queue) {
          entry.fail(error);
        }
      },
    );
  }

  /**
   * How many times the application's connection `base` closed since this
   * client object first asked (counted from then on). A command that was
   * out while it closed may have run twice: ioredis resends what it had not
   * answered once it reconnects (`autoResendUnfulfilledCommands`), and the
   * reply the caller gets is then the resend's.
   */
  closes(base: Redis): number {
    let counted = this.closings.get(base);
    if (counted === undefined) {
      const entry = {
        count: 0,
        listener: (): void => {
          entry.count += 1;
        },
      };
      base.on("close", entry.listener);
      this.closings.set(base, entry);
      counted = entry;
    }
    return counted.count;
  }

  /** `host:port` of the master `base` is connected to (`Masters` knows them by it). */
  nodeOf(base: Redis): string {
    return address(base);
  }

  /** A dedicated connection to the master serving `key`, from the pool or new. */
  async checkout(key: string): Promise<Link> {
    return this.checkoutOn(await this.nodeFor(key));
  }

  /** A dedicated connection to the master `base` (the application's connection to it) is connected to. */
  async checkoutOn(base: Redis): Promise<Link> {
    if (this.closed) {
      throw new Error("the client object is closed");
    }
    const node = address(base);
    const pool = this.idle.get(node) ?? [];
    for (let link = pool.pop(); link !== undefined; link = pool.pop()) {
      if (link.usable) {
        return link;
      }
      this.drop(link);
    }
    const conn = base.duplicate({
      // The reply of a BLOCK comes when the wait ends: this connection's
      // calls are bounded by the wait plus a margin (`Links.call`), not by
      // the application's timeouts.
      commandTimeout: undefined,
      socketTimeout: undefined,
      lazyConnect: false,
      // A broken dedicated connection is dropped, never reconnected: a
      // command resent after a reconnect could take a lock nobody waits for.
      retryStrategy: () => null,
      autoResendUnfulfilledCommands: false,
      enableOfflineQueue: true,
    });
    // Errors reach the calls that fail; without a listener ioredis would
    // also print each one.
    conn.on("error", () => undefined);
    const id = conn.client("ID").then(Number);
    id.catch(() => undefined); // awaited only on cancellation
    const link = new Link(conn, base, node, id);
    this.open.add(link);
    return link;
  }

  /** Gives a dedicated connection back (or closes it, when broken or the pool is full). */
  checkin(link: Link): void {
    if (this.closed || !link.usable) {
      this.drop(link);
      return;
    }
    const pool = this.idle.get(link.node) ?? [];
    if (pool.length >= MAX_IDLE) {
      this.drop(link);
      return;
    }
    pool.push(link);
    this.idle.set(link.node, pool);
  }

  /** Closes a dedicated connection: the server ends whatever is bound to it (a wait, session holds). */
  drop(link: Link): void {
    link.broken = true;
    this.open.delete(link);
    link.conn.disconnect();
  }

  /**
   * Sends one command on a dedicated connection and waits `timeoutMs` for
   * its reply (null: without limit). A reply that did not come in time
   * leaves the connection unusable: it is closed, which also ends the
   * server's wait. `signal`: its abort ends the server-side wait with
   * `CLIENT UNBLOCK` from the application's connection; the call then
   * resolves with the server's reply to the ended wait (the caller checks
   * the signal and releases what the reply may still have granted).
   */
  async call(link: Link, args: Args, timeoutMs: number | null, signal?: AbortSignal): Promise<unknown> {
    const [first] = await this.pipeline(link, [args], timeoutMs, signal);
    if (first === undefined || first.error !== null) {
      throw first?.error ?? new Error("no reply");
    }
    return first.reply;
  }

  /**
   * `commands` in one write on a dedicated connection (ioredis's pipeline),
   * every reply read (an error reply as its error), within `timeoutMs` and
   * ended by `signal` as `call`. Rejects when the connection failed (the
   * first command's reply was lost): the connection is then unusable.
   */
  pipeline(link: Link, commands: readonly Args[], timeoutMs: number | null, signal?: AbortSignal): Promise<Settled[]> {
    return new Promise((resolve, reject) => {
      let settled = false;
      let timer: NodeJS.Timeout | undefined;
      const onAbort = (): void => {
        void this.unblock(link, () => settled);
      };
      const finish = (): void => {
        settled = true;
        if (timer !== undefined) {
          clearTimeout(timer);
        }
        signal?.removeEventListener("abort", onAbort);
      };
      const pipeline = link.conn.pipeline();
      for (const [name, ...args] of commands) {
        pipeline.call(name, ...args);
      }
      pipeline.exec().then(
        (results) => {
          finish();
          const replies = settle(results);
          const lost = replies.find((r) => r.error !== null && !isReplyError(r.error));
          if (lost !== undefined || replies.length !== commands.length) {
            link.broken = true;
            reject(lost?.error ?? new Error("the connection closed"));
            return;
          }
          resolve(replies);
        },
        (error: unknown) => {
          finish();
          link.broken = true;
          reject(error);
        },
      );
      if (timeoutMs !== null) {
        timer = setTimeout(() => {
          if (!settled) {
            this.drop(link); // rejects the pending calls with a closed-connection error
          }
        }, timeoutMs);
      }
      if (signal !== undefined) {
        if (signal.aborted) {
          onAbort();
        } else {
          signal.addEventListener("abort", onAbort, { once: true });
        }
      }
    });
  }

  /**
   * `commands` in one write on a dedicated connection to the master serving
   * `key` (a release and its latches' `DEL`, sent again after its reply on
   * the application's connection was lost or redirected), every reply
   * within `timeoutMs`; a `MOVED` first reply (a reshard) sends them once
   * more, to the slot's new master. Rejects when the connection failed. A
   * dedicated connection resends nothing, so the caller knows which send
   * the replies are of. The connection is the pool's when it has one.
   */
  async commands(key: string, commands: readonly Args[], timeoutMs: number): Promise<Settled[]> {
    let link: Link | null = await this.checkout(key);
    try {
      const replies = await this.pipeline(link, commands, timeoutMs);
      const first = replies[0];
      if (!this.cluster || first === undefined || first.error === null || !isMoved(first.error)) {
        return replies;
      }
      this.checkin(link);
      link = null; // given back: if the redirect fails, nothing to give back twice
      link = await this.checkoutOn(await this.redirected(first.error, key));
      return await this.pipeline(link, commands, timeoutMs);
    } finally {
      if (link !== null) {
        this.checkin(link); // a broken one is dropped
      }
    }
  }

  /**
   * Ends the server-side wait of `link`'s pending command: `CLIENT UNBLOCK
   * <id>` from the application's connection to that master: the module
   * answers the wait as if it ran out. It replies 0 while the command has
   * not reached the server yet (tried again a few times, `CLIENT LIST ID`
   * telling whether it waits yet) and on a module before 0.4.0, which
   * `CLIENT UNBLOCK` did not reach. The connection is then closed, which
   * ends the wait as well: the module drops a disconnected waiter's ticket.
   * Either way the server has no blocked client left.
   */
  private async unblock(link: Link, settled: () => boolean): Promise<void> {
    try {
      // A connection whose CLIENT ID never answered is stalled: closed below.
      const id = await link.idWithin(UNBLOCK_TRIES * UNBLOCK_RETRY_MS);
      for (let i = 0; id !== null && i < UNBLOCK_TRIES && !settled(); i++) {
        if (Number(await link.base.call("CLIENT", "UNBLOCK", id)) === 1 || settled()) {
          return;
        }
        const entry = String(await link.base.call("CLIENT", "LIST", "ID", id));
        if (/ flags=\S*b/.test(entry) || settled()) {
          break; // waiting, and not ended by CLIENT UNBLOCK
        }
        await new Promise((resolve) => setTimeout(resolve, UNBLOCK_RETRY_MS));
      }
    } catch {
      // The application's connection failed: closing ours ends the wait.
    }
    if (!settled()) {
      this.drop(link);
    }
  }

  /**
   * Resolves once the server no longer lists `link`'s connection (closed
   * by `drop`: the server sees it go when it reads the end of it, which can
   * come after commands sent since on other connections), or after
   * `timeoutMs`, or at once when its `CLIENT ID` is unknown (never
   * answered: it cannot be looked up). From then nothing can be granted to
   * a wait it carried.
   */
  async gone(link: Link, timeoutMs: number): Promise<void> {
    const deadline = performance.now() + timeoutMs;
    const id = await link.idWithin(timeoutMs);
    while (id !== null && String(await link.base.call("CLIENT", "LIST", "ID", id)).trim() !== "" && performance.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, UNBLOCK_RETRY_MS));
    }
  }

  /** Closes every dedicated connection (the pool's and those in use: session holds end). */
  close(): void {
    this.closed = true;
    for (const link of [...this.open]) {
      this.drop(link);
    }
    this.idle.clear();
    for (const [base, counted] of this.closings) {
      base.off("close", counted.listener);
    }
    this.closings.clear();
  }
}

/** `host:port` of an ioredis connection, as a cluster's slot map names its nodes. */
function address(node: Redis): string {
  return `${node.options.host ?? "localhost"}:${node.options.port ?? 6379}`;
}
