/**
 * The connections a lock object's commands travel on.
 *
 * Commands that never wait on the server (an acquisition's first attempt,
 * releases, renewals, a grant given back, `CLIENT UNBLOCK`) go on the
 * client object's *own* connection to the key's master (`Own`: a
 * `duplicate()` of the application's connection to it, opened at its
 * first command), shared by every handle of the client object: those of
 * one tick leave together, a few per write (`Links.shared`). Never on
 * the application's connection: ioredis resends there what was not
 * answered once it reconnects (`autoResendUnfulfilledCommands`), so a
 * command given up for lost (and resent by the handle) could run again
 * much later as a new one: a release freeing a hold taken since, an
 * acquisition taking one nobody knows of. The own connection resends
 * nothing and queues nothing while disconnected; a command whose reply
 * does not come in time closes it, dropping whatever it carried, and the
 * next command opens a fresh one. In a cluster: one per master (ioredis
 * cannot route the module's commands by key: it does not know where
 * their keys are).
 *
 * An acquisition that waits on the server (`BLOCK`), and any acquisition
 * whose replica check waits (`WAIT`, `WAITAOF`) or binds a session, goes
 * on a *dedicated* connection (a `duplicate()` of that connection, kept in
 * a small pool): a `BLOCK` or `WAIT` holds its connection until the server
 * replies, which on the shared connection would stall every other command
 * of the client object, and `WAIT` counts the writes of its own
 * connection. The dedicated connection has no command or socket timeout of
 * its own: the reply is waited for as long as the wait plus a margin, so a
 * wait longer than the application's `commandTimeout` works. A session
 * hold keeps its dedicated connection for the hold's life.
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
   * to the same master (names the client object's own connection to it,
   * which sends `CLIENT UNBLOCK`); `node`: `host:port`;
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

/**
 * Idle dedicated connections kept per master: as many as the acquisitions
 * of one client object that wait at once (`BLOCK`, and with replicas every
 * acquisition: `WAIT`) in a busy application, which would otherwise open
 * (a connection, its ready check and `CLIENT ID`) and close one per
 * acquisition beyond the pool's size.
 */
const MAX_IDLE = 16;

/**
 * The most commands of one tick that leave in one write on an own
 * connection: once this many are queued they leave, and what follows
 * starts the next write. Eight workers' commands in one write kept the
 * server idle while this process built them and this process idle while
 * the server ran them; in writes of at most 4 the server runs the first
 * ones while the rest are built (issue 35: 8 workers' uncontended cycles
 * against redlock's went from 0.83x to 0.98-1.17x, medians of four runs
 * of 6-8 alternating rounds; 3 measured the same, 6 less:
 * docs/benchmarks.md).
 */
const MAX_BATCH = 4;

/** Commands waiting for this tick's write on an own connection, and who waits for their replies. */
interface Queued {
  readonly commands: readonly Args[];
  /** Set once its replies came, or it failed or timed out: whatever comes after is not its. */
  settled: boolean;
  /** The connection it was written on (null: not written yet). */
  sent: Own | null;
  /** When its replies are given up for lost (`performance.now()` time). */
  readonly deadline: number;
  readonly done: (replies: Settled[]) => void;
  readonly fail: (error: unknown) => void;
  /** Its deadline passed: fails it, and closes the connection it was written on. */
  readonly expire: () => void;
}

/**
 * The client object's own connection to one master (see the top of this
 * file): every command on it is written once, or never. ioredis resends
 * nothing after a reconnect, queues nothing while disconnected (the
 * commands wait here for it to be ready, each until its own timeout, and
 * only those still waiting then are written), and fails at once whatever
 * was out when it closed (no retries per request): the callers learn of
 * every lost reply and resend it themselves, knowing they did.
 */
class Own {
  readonly conn: Redis;
  private waiting: Queued[] = [];

  /** `base`: the application's connection to the master (duplicated: same server, auth, TLS); `ended`: called once it can carry nothing more. */
  constructor(
    base: Redis,
    readonly node: string,
    ended: (own: Own) => void,
  ) {
    this.conn = base.duplicate({
      autoResendUnfulfilledCommands: false,
      enableOfflineQueue: false,
      maxRetriesPerRequest: 0,
      // Its calls are bounded by the callers' margins (`Links.shared`),
      // which close it when a reply does not come: not by the
      // application's timeouts, which would leave it open.
      commandTimeout: undefined,
      socketTimeout: undefined,
      lazyConnect: false,
    });
    // Errors reach the calls that fail; without a listener ioredis would
    // also print each one.
    this.conn.on("error", () => undefined);
    this.conn.on("ready", () => {
      const waiting = this.waiting;
      this.waiting = [];
      this.write(waiting);
    });
    this.conn.on("end", () => {
      const waiting = this.waiting;
      this.waiting = [];
      for (const entry of waiting) {
        entry.fail(new Error("the connection closed"));
      }
      ended(this);
    });
  }

  /** Writes `queue` now when the connection is ready, else once it is (a reconnect after the server went away). */
  send(queue: Queued[]): void {
    if (this.conn.status === "ready") {
      this.write(queue);
      return;
    }
    this.waiting = [...this.waiting.filter((entry) => !entry.settled), ...queue];
  }

  /**
   * Writes the commands of `queue` that are still awaited in one socket
   * write and hands each caller its replies. Each command is a plain call
   * (ioredis writes it at once on a ready connection), the socket corked
   * meanwhile so that they leave together: the batching of a pipeline
   * without its bookkeeping (its object, its result array, its
   * concatenation), which cost more per command than the call itself.
   */
  private write(queue: readonly Queued[]): void {
    const live = queue.filter((entry) => !entry.settled);
    if (live.length === 0) {
      return;
    }
    const stream = this.conn.stream;
    stream.cork();
    try {
      for (const entry of live) {
        entry.sent = this;
        this.issue(entry);
      }
    } finally {
      stream.uncork();
    }
  }

  /**
   * Sends `entry`'s commands; once every reply came, hands them over, or
   * fails the entry when one was lost (the connection's error, not an
   * error reply), as a pipeline's results would.
   */
  private issue(entry: Queued): void {
    const { commands } = entry;
    if (commands.length === 1) {
      this.conn.call(...commands[0]!).then(
        (reply) => entry.done([{ error: null, reply }]),
        (error: unknown) => (isReplyError(error) ? entry.done([{ error: error as Error }]) : entry.fail(error)),
      );
      return;
    }
    const replies: Settled[] = new Array<Settled>(commands.length);
    let left = commands.length;
    let lost: unknown = null;
    const arrived = (at: number, reply: Settled | null, error: unknown): void => {
      if (reply !== null) {
        replies[at] = reply;
      } else if (lost === null) {
        lost = error;
      }
      left -= 1;
      if (left === 0) {
        if (lost === null) {
          entry.done(replies);
        } else {
          entry.fail(lost);
        }
      }
    };
    commands.forEach((args, at) => {
      this.conn.call(...args).then(
        (reply) => arrived(at, { error: null, reply }, null),
        (error: unknown) => (isReplyError(error) ? arrived(at, { error: error as Error }, null) : arrived(at, null, error)),
      );
    });
  }
}

/** The connections of one client object: its own one per master, and a pool of dedicated ones per master. */
export class Links {
  private readonly idle = new Map<string, Link[]>();
  private readonly open = new Set<Link>();
  private closed = false;
  // The own connection per master (`host:port`), opened at its first command.
  private readonly owns = new Map<string, Own>();
  // This tick's commands per master, written in one socket write once
  // the tick's code ran (`flush`), and the application's connection there.
  private readonly queues = new Map<string, { readonly base: Redis; readonly entries: Queued[] }>();
  // The own connections' calls awaiting their replies, each until its
  // deadline, watched by one timer armed for the earliest (a timer per
  // call cost as much as the rest of its bookkeeping): `watchAt` is when
  // it fires (Infinity: not armed).
  private readonly awaited = new Set<Queued>();
  private watchTimer: NodeJS.Timeout | null = null;
  private watchAt = Infinity;

  /**
   * The application's connection when it is one server, the master of
   * every key (`nodeFor` without its await: a command's hot path); null
   * for a cluster.
   */
  readonly single: Redis | null;

  /**
   * `client`: the application's ioredis client (never closed by this
   * package, and sent nothing on but what finds a cluster's masters:
   * `PING`, the slot map);
   * `replyMargin`: how long a command without a timeout of its own
   * (`command`) waits for its reply (ms).
   */
  constructor(
    readonly client: RedisClient,
    private readonly replyMargin: number,
  ) {
    this.single = this.cluster ? null : (client as Redis);
  }

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
   * A short command on the own connection to the master serving `key`
   * (`shared`), its reply awaited `replyMargin`; a `MOVED` reply (a
   * reshard) sends it once more, to the slot's new master. Rejects with
   * its error reply, or when its reply was lost (it may have run).
   */
  async command(key: string, args: Args): Promise<unknown> {
    const base = this.single ?? (await this.nodeFor(key));
    try {
      return await this.on(base, args);
    } catch (error) {
      if (!this.cluster || !isMoved(error)) {
        throw error;
      }
      return this.on(await this.redirected(error, key), args);
    }
  }

  /** One command on the own connection to the master `base` is connected to, its reply awaited `replyMargin`. */
  private async on(base: Redis, args: Args): Promise<unknown> {
    const [reply] = await this.shared(base, [args], this.replyMargin);
    if (reply === undefined || reply.error !== null) {
      throw reply?.error ?? new Error(`no reply to ${args[0]}`);
    }
    return reply.reply;
  }

  /**
   * `commands` in one round trip on the client object's own connection to
   * the master `base` (the application's connection to it) is connected
   * to, written together with the other commands this client object
   * sends there in the same tick (a socket write per `MAX_BATCH`):
   * concurrent workers' acquisitions and releases leave together. Only
   * commands that never wait on the server go here (a `BLOCK` or `WAIT`
   * would hold up the others). Resolves with every reply (an error reply
   * as its error); rejects when the connection failed before the replies
   * came, or when they did not come within `timeoutMs` (the commands may
   * have run): the connection is then closed, and what it carried is
   * never sent again.
   */
  shared(base: Redis, commands: readonly Args[], timeoutMs: number): Promise<Settled[]> {
    if (this.closed) {
      return Promise.reject(new Error("the client object is closed"));
    }
    return new Promise<Settled[]>((resolve, reject) => {
      const entry: Queued = {
        commands,
        settled: false,
        sent: null,
        deadline: performance.now() + timeoutMs,
        done: (replies) => {
          if (!entry.settled) {
            entry.settled = true;
            this.awaited.delete(entry);
            resolve(replies);
          }
        },
        fail: (error) => {
          if (!entry.settled) {
            entry.settled = true;
            this.awaited.delete(entry);
            reject(error);
          }
        },
        expire: () => {
          if (entry.settled) {
            return;
          }
          entry.settled = true;
          this.awaited.delete(entry);
          reject(new Error(`no reply within ${timeoutMs} ms`));
          if (entry.sent !== null) {
            // Its reply may still come, or the command may still be
            // waiting to run: the connection goes, with all it carries.
            this.abandon(entry.sent);
          }
        },
      };
      // Nothing on its way: the first command of a tick leaves at once, so
      // that the server runs it while this process goes on with the rest
      // of the tick (waiting for the tick's end kept eight workers in
      // lockstep, each side idle while the other worked); what follows it
      // in the tick leaves together, in writes of at most `MAX_BATCH`.
      const idle = this.awaited.size === 0;
      this.awaited.add(entry);
      if (entry.deadline < this.watchAt) {
        this.watch(entry.deadline);
      }
      const node = address(base);
      const queue = this.queues.get(node);
      if (queue !== undefined) {
        queue.entries.push(entry);
        if (queue.entries.length >= MAX_BATCH) {
          this.flush(node);
        }
        return;
      }
      this.queues.set(node, { base, entries: [entry] });
      if (idle) {
        this.flush(node);
        return;
      }
      // After the code of this tick (and its promise jobs) queued what it sends.
      process.nextTick(() => this.flush(node));
    });
  }

  /** Arms the one timer of the own connections' calls for `at` (`performance.now()` time). */
  private watch(at: number): void {
    if (this.watchTimer !== null) {
      clearTimeout(this.watchTimer);
    }
    this.watchAt = at;
    this.watchTimer = setTimeout(() => this.expired(), Math.max(1, Math.ceil(at - performance.now())));
    // Left armed once nothing is awaited (disarming it after every reply
    // would cost what it saves): unref'd, it keeps no process alive (a call
    // awaited keeps its connection, which does).
    this.watchTimer.unref();
  }

  /** Fails the calls whose reply did not come by their deadline, and arms the timer for the next deadline. */
  private expired(): void {
    this.watchTimer = null;
    this.watchAt = Infinity;
    const now = performance.now();
    let next = Infinity;
    for (const entry of [...this.awaited]) {
      if (entry.deadline <= now) {
        entry.expire();
      } else if (entry.deadline < next) {
        next = entry.deadline;
      }
    }
    if (next < Infinity) {
      this.watch(next);
    }
  }

  /** Hands the commands queued for `node` to its own connection (opened now when there is none). */
  private flush(node: string): void {
    const queue = this.queues.get(node);
    if (queue === undefined) {
      return;
    }
    this.queues.delete(node);
    if (this.closed) {
      for (const entry of queue.entries) {
        entry.fail(new Error("the client object is closed"));
      }
      return;
    }
    let own = this.owns.get(node);
    if (own === undefined) {
      own = new Own(queue.base, node, (ended) => this.forgetOwn(ended));
      this.owns.set(node, own);
    }
    own.send(queue.entries);
  }

  /** Closes an own connection a reply did not come on (its commands fail): the next command opens a fresh one. */
  private abandon(own: Own): void {
    this.forgetOwn(own);
    own.conn.disconnect();
  }

  private forgetOwn(own: Own): void {
    if (this.owns.get(own.node) === own) {
      this.owns.delete(own.node);
    }
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
   * `CLIENT UNBLOCK` from the own connection; the call then
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
   * `key` (a release, sent again after its reply on the own connection was
   * lost or redirected; a write sent once: `once`), every reply
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
   * <id>` from the own connection to that master: the module
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
        if (Number(await this.on(link.base, ["CLIENT", "UNBLOCK", id])) === 1 || settled()) {
          return;
        }
        const entry = String(await this.on(link.base, ["CLIENT", "LIST", "ID", id]));
        if (/ flags=\S*b/.test(entry) || settled()) {
          break; // waiting, and not ended by CLIENT UNBLOCK
        }
        await new Promise((resolve) => setTimeout(resolve, UNBLOCK_RETRY_MS));
      }
    } catch {
      // The own connection failed: closing the dedicated one ends the wait.
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
    while (id !== null && String(await this.on(link.base, ["CLIENT", "LIST", "ID", id])).trim() !== "" && performance.now() < deadline) {
      await new Promise((resolve) => setTimeout(resolve, UNBLOCK_RETRY_MS));
    }
  }

  /** Closes the own connections and every dedicated one (the pool's and those in use: session holds end). */
  close(): void {
    this.closed = true;
    if (this.watchTimer !== null) {
      clearTimeout(this.watchTimer);
      this.watchTimer = null;
      this.watchAt = Infinity;
    }
    for (const own of [...this.owns.values()]) {
      this.abandon(own);
    }
    for (const link of [...this.open]) {
      this.drop(link);
    }
    this.idle.clear();
  }
}

// Each connection's `host:port`, built once: it is looked up at every command.
const addresses = new WeakMap<Redis, string>();

/** `host:port` of an ioredis connection, as a cluster's slot map names its nodes. */
function address(node: Redis): string {
  let known = addresses.get(node);
  if (known === undefined) {
    known = `${node.options.host ?? "localhost"}:${node.options.port ?? 6379}`;
    addresses.set(node, known);
  }
  return known;
}
