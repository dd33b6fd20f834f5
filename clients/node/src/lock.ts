/**
 * `Lock`: one lock handle of a client object (`Client`): the plain lock
 * (Redisson's `RLock`), fenced (`RFencedLock`) or not, reentrant or not, a
 * read-write lock's read or write side (`RReadWriteLock`), and, through
 * `MultiLock`, several holds taken as one. Acquire with a wait on the
 * server and an `AbortSignal`, release, the watchdog, session holds and
 * replica sync, all here.
 */

import { EventEmitter } from "node:events";
import { asyncDispose } from "./dispose";
import { requestId, type Args, type Outcome, type Target } from "./commands";
import { NotAcquired, NotHeld, NotReentrant, NotSynced } from "./errors";
import { isMoved, isReplyError, type Link, type Links, type Settled } from "./link";
import { blockOf, LATCH_TTL_MS, remaining, toMs, type ReplicaSync } from "./options";
import { commandsOf, extraMs, INFO, NO_CHECKS, type Checks, type Masters } from "./sync";

/** An acquisition's reply, and what its replica check found short (null: acknowledged). */
interface Sent {
  readonly reply: unknown;
  readonly short: string | null;
}

/** The replica check planned for an acquisition on `node` (`host:port`), not sent yet. */
interface Planned {
  readonly node: string;
  readonly checks: Checks;
}
import { Watchdog } from "./watchdog";

/** How one acquisition waits and how long the hold lasts. */
export interface AcquireOptions {
  /**
   * Milliseconds to wait for the lock, on the server (`BLOCK`), never by
   * polling: `undefined`, `null` or `Infinity` wait without limit (the
   * default), 0 tries once. Any wait works whatever the application's
   * `commandTimeout`: the reply is read on a dedicated connection.
   */
  wait?: number | null;
  /**
   * Milliseconds the hold lasts. `undefined`/`null` (the default): the
   * client object's `watchdogTimeout` (30 s), renewed by the watchdog every
   * third of it while held. Given: no watchdog, the hold ends with it.
   */
  lease?: number | null;
  /**
   * Aborting it ends the wait on the server (`CLIENT UNBLOCK`): the call
   * rejects with `signal.reason` and holds nothing.
   */
  signal?: AbortSignal;
}

/** Called when the watchdog found a hold gone: its lock and owner, and the error when the server was unreachable. */
export type LostCallback = (lock: Lock, owner: string, cause: unknown) => void;

/** A lock handle's options. */
export interface HandleOptions {
  /**
   * `SESSION` holds: bound to the dedicated connection that took them; the
   * server keeps them while it is open (no watchdog) and frees them when it
   * closes. The handle keeps that connection for the hold's life.
   */
  session?: boolean;
  /** Called (besides the `lost` event) when the watchdog finds the hold gone. */
  onLost?: LostCallback;
}

/** What a lock handle needs of its client object (`Client`). */
export interface ClientContext {
  /** The application's connections and the pool of dedicated ones. */
  readonly links: Links;
  /** The lease of a hold taken without one (ms), renewed every third of it. */
  readonly watchdogTimeout: number;
  /** Replica acknowledgement after each acquisition. */
  readonly sync: ReplicaSync;
  /** What this client object's acquisitions learned of the masters' replicas. */
  readonly masters: Masters;
  /** Added to a wait for its reply to arrive (ms). */
  readonly replyMargin: number;
  /** The running watchdogs, stopped when the client object closes. */
  readonly dogs: Set<Watchdog>;
  /** How many of this client object's acquisitions wait on the server (`BLOCK`), per lock key. */
  readonly waiters: Map<string, number>;
}

/**
 * One acquisition's hold, for `await using` (`Symbol.asyncDispose`
 * releases it) or `try … finally { await hold.release() }`.
 */
export class Hold implements AsyncDisposable {
  private done = false;

  /**
   * `lock`: the handle holding it; `token`: its fencing token (null unless
   * fenced); `signal`: aborted (with a `NotHeld` reason) if the watchdog
   * finds the hold gone, for the work to stop.
   */
  constructor(
    readonly lock: Lock,
    readonly token: number | null,
    readonly signal: AbortSignal,
  ) {}

  /** Releases this hold (once; a second call does nothing). Rejects with `NotHeld` when it was lost. */
  async release(): Promise<void> {
    if (this.done) {
      return;
    }
    this.done = true;
    await this.lock.release();
  }

  /** `await using`: releases the hold at the end of the block. */
  [asyncDispose](): Promise<void> {
    return this.release();
  }
}

/**
 * A lock handle: the owner `<client UUID>:<n>`, its own (re-entry is per
 * handle), with its holds as this process knows them. Emits `lost`
 * (`(owner, cause)`) when the watchdog finds the hold gone.
 *
 * ```ts
 * const lock = locks.lock("invoice:42");
 * await using hold = await lock.hold({ wait: 5_000 }); // NotAcquired after 5 s
 * ```
 */
export class Lock extends EventEmitter {
  /** The lock's name (a multi-lock: its first lock's). */
  readonly name: string;
  /** `SESSION` holds. */
  readonly session: boolean;

  private count = 0;
  private currentToken: number | null = null;
  private isLost = false;
  private leaseMs = 0;
  private sessionLink: Link | null = null;
  private dog: Watchdog | null = null;
  private lostController: AbortController | null = null;
  private latches: string[] = []; // the acquisitions' latches since the last release
  // The unlock latches of the releases sent: deleted by the next release's
  // DEL, never by their own (a release's own latch must outlive its reply,
  // for its resend to be answered from it); they outlive the handle's
  // holds, or expire on their own.
  private releaseLatches: string[] = [];
  private readonly onLost: LostCallback | undefined;

  /** Made by `Client`: `target` says what it sends; `owner` is its own. */
  constructor(
    protected readonly ctx: ClientContext,
    protected readonly target: Target,
    readonly owner: string,
    options: HandleOptions = {},
  ) {
    super();
    this.name = target.key;
    this.session = options.session === true;
    this.onLost = options.onLost;
  }

  /** Whether this handle holds the lock (as far as this process knows: see `lost`). */
  get held(): boolean {
    return this.count > 0 && !this.isLost;
  }

  /**
   * True once the watchdog found the hold gone: its lease ran out or the
   * lock was forced open; `release()` then rejects with `NotHeld`.
   */
  get lost(): boolean {
    return this.count > 0 && this.isLost;
  }

  /** The fencing token of the latest acquisition (a fenced lock while held; null otherwise). */
  get token(): number | null {
    return this.count > 0 ? this.currentToken : null;
  }

  /**
   * Takes a hold: resolves true when taken, false when the wait ran out
   * first. Rejects with `NotReentrant` (a non-reentrant lock taken again),
   * `NotSynced` (the replicas did not acknowledge it: released again),
   * `signal.reason` when aborted, or ioredis's errors.
   */
  async acquire(options: AcquireOptions = {}): Promise<boolean> {
    return (await this.take(options)).acquired;
  }

  /**
   * Takes a hold, or rejects with `NotAcquired` (with the `pttl` of the
   * holds in the way) when the wait runs out. The `Hold` releases it, at
   * the latest when an `await using` block ends.
   */
  async hold(options: AcquireOptions = {}): Promise<Hold> {
    const outcome = await this.take(options);
    if (!outcome.acquired) {
      throw new NotAcquired(this.name, outcome.pttl);
    }
    return new Hold(this, outcome.token, this.lostController!.signal);
  }

  /**
   * Runs `fn` holding the lock, and releases it after, whatever `fn` did.
   * Rejects with `NotAcquired` when the wait runs out (fn not run).
   */
  async withLock<T>(fn: (hold: Hold) => T | Promise<T>, options: AcquireOptions = {}): Promise<T> {
    const hold = await this.hold(options);
    let result: T;
    try {
      result = await fn(hold);
    } catch (error) {
      await hold.release().catch(() => undefined); // fn's error is the one to see
      throw error;
    }
    await hold.release();
    return result;
  }

  /**
   * Releases one hold (the lock is free once every hold is released).
   * Rejects with `NotHeld` when the server says this handle held nothing:
   * never taken, already released, or lost.
   */
  async release(): Promise<void> {
    const { links } = this.ctx;
    const owner = this.owner;
    const wasLost = this.isLost;
    let reply: unknown;
    const link = this.sessionLink;
    if (link !== null) {
      // A session's holds live on their connection: released there, with
      // no request id (the connection's end would release them anyway).
      try {
        reply = await links.call(link, this.target.release(owner, this.leaseMs, null), this.ctx.replyMargin);
      } catch (error) {
        if (isReplyError(error)) {
          throw error;
        }
        this.forget();
        throw new NotHeld(`${this.name}: the session's connection closed`, { cause: error });
      }
    } else {
      reply = await this.releaseShared(owner);
    }
    const released = this.target.released(reply);
    if (this.count > 0) {
      this.count -= 1;
      if (released === null || released || this.count <= 0) {
        this.forget();
      }
    }
    if (released === null || wasLost) {
      // wasLost: the watchdog found the hold gone, whatever the release
      // replied.
      throw new NotHeld(`${this.name} is not held by ${owner}`);
    }
  }

  /**
   * The release of a hold that is not a session's, on the application's
   * connection (`Links.shared`, written with whatever else goes there in
   * the same tick). A single lock's carries a request id: sent once more
   * with the same id, it gets the first one's reply instead of releasing a
   * second hold. One `DEL`, pipelined with the release (one round trip),
   * deletes the latches whose replies came: the acquisitions' since the
   * last release, and those of the handle's earlier releases. The
   * release's own latch (the server's copy of its reply) is never in it,
   * the last hold's included: it is left to the handle's next release's
   * `DEL` (or to expire), so that a resend is answered from it with what
   * the first send did (released, or held nothing) instead of finding
   * nothing and guessing. The resends: by ioredis after the application's
   * connection reconnected (`autoResendUnfulfilledCommands`), or by this
   * when the reply was lost (the connection failed, no reply within the
   * margin), on a dedicated connection of the pool (`Links.commands`: it
   * resends nothing behind our back). A `MOVED` reply (a reshard) sends it
   * there too, to the slot's new master. The `DEL`'s reply is not looked
   * at: latches it missed expire on their own.
   */
  private async releaseShared(owner: string): Promise<unknown> {
    const { links } = this.ctx;
    const request = this.target.multi ? null : requestId();
    const args = this.target.release(owner, this.leaseMs || this.ctx.watchdogTimeout, request);
    const earlier = [...this.releaseLatches, ...this.latches];
    this.latches = [];
    this.releaseLatches = [];
    if (request !== null) {
      this.releaseLatches.push(this.target.latch(request));
    }
    const commands: Args[] = request !== null && earlier.length > 0 ? [args, ["DEL", ...earlier]] : [args];
    let replies: Settled[] | null = null;
    try {
      const sent = await links.shared(await links.nodeFor(this.target.key), commands, this.ctx.replyMargin);
      const moved = links.cluster && isMoved(sent[0]?.error);
      if (!moved) {
        replies = sent;
      }
    } catch (error) {
      if (request === null) {
        throw error;
      }
      // ioredis may still send it (it keeps what was not answered, and
      // resends it after a reconnect): its latch is never deleted, but
      // expires, so that a late send is answered from it instead of
      // releasing a hold taken since.
      this.releaseLatches.pop();
      replies = await links.commands(this.target.key, commands, this.ctx.replyMargin);
    }
    if (replies === null) {
      // Redirected (nothing ran): to the slot's new master.
      replies = await links.commands(this.target.key, commands, this.ctx.replyMargin);
    }
    const first = replies[0];
    if (first === undefined || first.error !== null) {
      throw first?.error ?? new Error("no reply to the release");
    }
    return first.reply;
  }

  /**
   * The acquisition, its replica sync, and the bookkeeping of what it took.
   * Its first attempt does not wait: on the application's connection
   * (`tryShared`), unless it is a session's or the replica check waits on
   * this master. Only when that attempt was refused and the caller may
   * wait does it wait on the server (`BLOCK`), on a dedicated connection.
   * A wait while another acquisition of this client object waits on the
   * same lock skips the try: the lock is taken, and a free one would be
   * handed to the waiter first in line, so the try would only cost a round
   * trip (each handle of a contended lock, after its release, again).
   */
  protected async take(options: AcquireOptions): Promise<Outcome> {
    const { links } = this.ctx;
    const watched = options.lease === undefined || options.lease === null;
    const leaseMs = watched ? this.ctx.watchdogTimeout : toMs(options.lease as number, "lease");
    let blockMs = blockOf(options.wait);
    const signal = options.signal;
    signal?.throwIfAborted();
    // A fresh request id per acquisition: its one resend below is answered
    // from the server's latch.
    let request = this.target.requested ? requestId() : null;
    const waitMs = blockMs || null; // the bounded wait asked for, kept by a resend
    const started = performance.now();
    const sessionLink = this.sessionLink;
    let link: Link | null = null;
    let keep = false;
    try {
      let planned: Planned | null = null;
      let lost = false;
      if (!this.session && (blockMs === null || !this.ctx.waiters.has(this.target.key))) {
        let tried: Sent | Planned | null = null;
        try {
          tried = await this.tryShared(leaseMs, waitMs, request);
        } catch (error) {
          if (isReplyError(error) || request === null || signal?.aborted) {
            throw error;
          }
          // The reply was lost (the connection failed or did not answer in
          // time): resent below, with the same request id.
          lost = true;
        }
        if (tried !== null && "reply" in tried) {
          const outcome = this.target.outcome(tried.reply, null);
          if (outcome.acquired || signal?.aborted) {
            return await this.settle(outcome, tried.short, null, leaseMs, watched, request, signal);
          }
          blockMs = remaining(blockMs, performance.now() - started);
          if (blockMs === null) {
            return outcome; // a try, or a wait already over
          }
          // Refused, and it may wait: it waits on the server, on a
          // dedicated connection, as an acquisition of its own (a refusal
          // stores no latch, but its id is spent).
          request = this.target.requested ? requestId() : null;
        } else {
          planned = tried;
        }
      }
      link = sessionLink ?? (await links.checkout(this.target.key));
      let sent: Sent;
      let touch: Args | null = null;
      if (lost) {
        ({ blockMs, touch } = this.resending(blockMs, started, request!, waitMs));
      }
      try {
        sent = await this.waiting(blockMs, () => this.send(link!, leaseMs, blockMs, waitMs, request, touch, signal, planned));
      } catch (error) {
        if (link === sessionLink || lost) {
          throw error;
        }
        if (isMoved(error)) {
          // The slot moved to another master (a reshard): once more, there.
          links.checkin(link);
          link = await links.checkoutOn(await links.redirected(error, this.target.key));
        } else if (!isReplyError(error) && !signal?.aborted && request !== null) {
          // The reply was lost (the connection failed or timed out): the
          // server may or may not have granted it. Once more, on a new
          // connection, with the same request id and what is left of the
          // wait: a grant is answered again instead of counted twice. A
          // session's hold is bound to its connection and was freed with
          // it, while its latch would answer "taken" and bind nothing: a
          // session resends with a new id, as a new acquisition.
          if (this.session) {
            request = requestId();
          }
          ({ blockMs, touch } = this.resending(blockMs, started, request, waitMs));
          links.checkin(link);
          link = await links.checkout(this.target.key);
        } else {
          throw error;
        }
        const resent = link;
        sent = await this.waiting(blockMs, () => this.send(resent, leaseMs, blockMs, waitMs, request, touch, signal, null));
      }
      const outcome = this.target.outcome(sent.reply, blockMs);
      keep = outcome.acquired && this.session && !signal?.aborted && sent.short === null;
      // After a lost try on the application's connection ioredis may still
      // send it: its latch is left to expire (not deleted by the release),
      // answering a late send instead of granting a hold nobody knows of.
      return await this.settle(outcome, sent.short, link, leaseMs, watched, lost ? null : request, signal);
    } catch (error) {
      if (isReplyError(error) && (error as Error).message.startsWith("NON_REENTRANT")) {
        throw new NotReentrant(`${this.name}: ${(error as Error).message}`, { cause: error });
      }
      if (isReplyError(error) && (error as Error).message.startsWith("NOREPLICAS")) {
        // The master's min-replicas-to-write refused the write: nothing was written.
        throw new NotSynced(`${this.name}: ${(error as Error).message}`, { cause: error });
      }
      if (!isReplyError(error)) {
        await this.leaveLine(waitMs);
      }
      if (signal?.aborted && error !== signal.reason && !isReplyError(error)) {
        // The wait was ended by closing its connection: had the server
        // served it at that moment, the reply is lost but the hold is not.
        // A handle holding nothing gives back whatever it may have got.
        if (this.count === 0) {
          await links.command(this.target.key, this.target.release(this.owner, leaseMs, null)).catch(() => undefined);
        }
        throw signal.reason;
      }
      throw error;
    } finally {
      if (link !== null && link !== sessionLink && !keep) {
        links.checkin(link);
      }
    }
  }

  /** Runs `send`, counted among the lock's waiters of this client object while it may wait on the server. */
  private async waiting<T>(blockMs: number | null, send: () => Promise<T>): Promise<T> {
    if (blockMs === null) {
      return send();
    }
    const { waiters } = this.ctx;
    const key = this.target.key;
    waiters.set(key, (waiters.get(key) ?? 0) + 1);
    try {
      return await send();
    } finally {
      const left = (waiters.get(key) ?? 1) - 1;
      if (left > 0) {
        waiters.set(key, left);
      } else {
        waiters.delete(key);
      }
    }
  }

  /**
   * What a resend of a lost acquisition waits (what is left of its wait)
   * and writes besides: a replay writes nothing on its connection, so a
   * `WAIT` after it would not cover the grant the first send wrote: one
   * write after it (the latch's expiry set again; nothing when refused),
   * in the same round trip.
   */
  private resending(blockMs: number | null, started: number, request: string, waitMs: number | null): { blockMs: number | null; touch: Args | null } {
    return {
      blockMs: remaining(blockMs, performance.now() - started),
      touch: this.ctx.sync.enabled ? ["PEXPIRE", this.target.acquireLatch(request), LATCH_TTL_MS + (waitMs ?? 0)] : null,
    };
  }

  /**
   * What an acquisition's reply means for the caller: aborted meanwhile,
   * a grant given back (and the signal's reason or `NotSynced` thrown);
   * else a grant recorded (`link`: the dedicated connection it came on,
   * kept by a session; null: the application's).
   */
  private async settle(outcome: Outcome, short: string | null, link: Link | null, leaseMs: number, watched: boolean, request: string | null, signal: AbortSignal | undefined): Promise<Outcome> {
    if (signal?.aborted) {
      if (outcome.acquired) {
        // Served at the moment it was cancelled: given back.
        await this.giveBack(link, leaseMs);
      }
      throw signal.reason;
    }
    if (outcome.acquired) {
      if (short !== null) {
        await this.giveBack(link, leaseMs);
        throw new NotSynced(`${this.name}: ${short} within ${this.ctx.sync.timeout} ms; the hold was released`);
      }
      // A session's release sends no DEL: its latch expires on its own.
      this.record(outcome, leaseMs, watched, this.session ? link : null, this.session ? null : request);
    }
    return outcome;
  }

  /**
   * An acquisition's first attempt, which does not wait (no `BLOCK`), on
   * the application's connection to the lock's master (`Links.shared`: no
   * connection of its own to check out, and written with whatever else goes
   * there in the same tick), with the `INFO` the replica check asks now and
   * then. Returns the replica check's plan instead, sending nothing, when
   * it waits on this master (`WAIT`, `WAITAOF`: they would hold up the
   * application's connection, and `WAIT` counts the writes of its own
   * connection): the acquisition goes on a dedicated connection. A `MOVED`
   * reply (a reshard) re-reads the slot map and leaves the acquisition to
   * the dedicated connection too (nothing ran). Rejects with the
   * acquisition's error reply, or ioredis's error (the reply lost: it may
   * have run).
   */
  private async tryShared(leaseMs: number, waitMs: number | null, request: string | null): Promise<Sent | Planned | null> {
    const { links, masters, sync, replyMargin } = this.ctx;
    const base = await links.nodeFor(this.target.key);
    const node = links.nodeOf(base);
    let checks = masters.plan(node, sync);
    if (checks === null) {
      const asked = performance.now();
      const [info] = await links.shared(base, [INFO], replyMargin);
      if (info === undefined || info.error !== null) {
        throw info?.error ?? new Error("no reply to INFO");
      }
      masters.learn(node, info.reply, asked);
      checks = masters.plan(node, sync) ?? NO_CHECKS;
    }
    if (extraMs(checks) > 0) {
      return { node, checks };
    }
    const args = this.target.acquire(this.owner, leaseMs, null, false, request, waitMs);
    const replies = await links.shared(base, [args, ...commandsOf(checks)], replyMargin);
    const first = replies[0];
    if (first === undefined || first.error !== null) {
      if (this.ctx.links.cluster && isMoved(first?.error)) {
        await links.redirected(first!.error, this.target.key);
        return null;
      }
      throw first?.error ?? new Error("no reply to the acquisition");
    }
    return { reply: first.reply, short: masters.read(checks, replies.slice(1), node) };
  }

  /**
   * One send of the acquisition on `link`, in one round trip: the command,
   * after a resend its `touch`, then what the replica check sends for the
   * master (`WAIT`, `WAITAOF`, now and then `INFO`: `Masters`), pipelined;
   * the replies awaited as long as the wait, the checks' timeouts and a
   * margin (BLOCK 0: without limit). The master's INFO is asked first, in a
   * round trip of its own, only when nothing is known of it yet. `planned`:
   * the checks `tryShared` planned already (the `INFO` it marked as due
   * rides here). Rejects with the acquisition's error reply.
   */
  private async send(link: Link, leaseMs: number, blockMs: number | null, waitMs: number | null, request: string | null, touch: Args | null, signal: AbortSignal | undefined, planned: Planned | null): Promise<Sent> {
    const { links, masters, sync } = this.ctx;
    let checks = planned !== null && planned.node === link.node ? planned.checks : masters.plan(link.node, sync);
    if (checks === null) {
      const asked = performance.now();
      masters.learn(link.node, await links.call(link, INFO, this.ctx.replyMargin), asked);
      checks = masters.plan(link.node, sync) ?? NO_CHECKS;
    }
    const args = this.target.acquire(this.owner, leaseMs, blockMs, this.session, request, waitMs);
    const commands: Args[] = [args, ...(touch === null ? [] : [touch]), ...commandsOf(checks)];
    const timeout = blockMs === 0 ? null : (blockMs ?? 0) + extraMs(checks) + this.ctx.replyMargin;
    const replies = await links.pipeline(link, commands, timeout, signal);
    const first = replies[0];
    if (first === undefined || first.error !== null) {
      throw first?.error ?? new Error("no reply to the acquisition");
    }
    const short = masters.read(checks, replies.slice(touch === null ? 1 : 2), link.node);
    return { reply: first.reply, short };
  }

  /**
   * Releases the hold an acquisition just took on `link` (null: it came on
   * the application's connection, which gives it back); when `link` failed
   * (a replica sync's reply lost), on the application's connection: a hold
   * that is not a session's outlives `link` and must not be left to its
   * lease.
   */
  private async giveBack(link: Link | null, leaseMs: number): Promise<void> {
    const args = this.target.release(this.owner, leaseMs, null);
    if (link === null) {
      await this.ctx.links.command(this.target.key, args);
      return;
    }
    try {
      await this.ctx.links.call(link, args, this.ctx.replyMargin);
    } catch (error) {
      if (isReplyError(error) || this.session) {
        throw error;
      }
      await this.ctx.links.command(this.target.key, args);
    }
  }

  /**
   * Takes the owner out of a fair lock's line a failed wait may have left
   * it in: the server does so itself when the waiting connection closes,
   * but a connection it still believes open would keep the owner in the
   * line, holding up everyone behind. Best effort.
   */
  private async leaveLine(waitMs: number | null): Promise<void> {
    const args = this.target.abandon(this.owner, waitMs);
    if (args !== null) {
      await this.ctx.links.command(this.target.key, args).catch(() => undefined);
    }
  }

  /**
   * Counts a hold taken (`link`: the session's connection, kept for it;
   * `request`: the acquisition's request id, whose latch the next release
   * deletes).
   */
  private record(outcome: Outcome, leaseMs: number, watched: boolean, link: Link | null, request: string | null): void {
    if (this.isLost) {
      // The holds the watchdog found gone are gone on the server: this is
      // the first of a new series.
      this.count = 0;
    }
    if (request !== null) {
      this.latches.push(this.target.acquireLatch(request));
    }
    if (this.count === 0 || this.lostController === null) {
      this.lostController = new AbortController();
    }
    this.count += 1;
    this.currentToken = outcome.token;
    this.isLost = false;
    this.leaseMs = leaseMs;
    if (link !== null && this.sessionLink === null) {
      this.sessionLink = link;
    }
    if (watched && !this.session && this.dog === null) {
      const owner = this.owner;
      const args = this.target.renew(owner, leaseMs);
      const dog: Watchdog = new Watchdog(
        leaseMs,
        async () => this.target.renewed(await this.ctx.links.command(this.target.key, args)),
        (cause) => this.markLost(dog, cause),
      );
      this.dog = dog;
      this.ctx.dogs.add(dog);
      dog.start();
    }
  }

  private markLost(dog: Watchdog, cause: unknown): void {
    this.ctx.dogs.delete(dog);
    if (this.dog !== dog) {
      return;
    }
    this.dog = null;
    this.isLost = true;
    this.lostController?.abort(new NotHeld(`${this.name}: the hold of ${this.owner} was lost`, { cause }));
    this.emit("lost", this.owner, cause);
    this.onLost?.(this, this.owner, cause);
  }

  /**
   * Drops every hold of this handle: stops the watchdog, gives the
   * session's connection back. The releases' latches stay for the next
   * release's `DEL`.
   */
  private forget(): void {
    if (this.dog !== null) {
      this.dog.stop();
      this.ctx.dogs.delete(this.dog);
      this.dog = null;
    }
    this.count = 0;
    this.currentToken = null;
    this.isLost = false;
    this.lostController = null;
    this.latches = [];
    const link = this.sessionLink;
    this.sessionLink = null;
    if (link !== null) {
      this.ctx.links.checkin(link);
    }
  }

  /** Whether this is a fair lock (`FAIRLOCK.*`). */
  get fair(): boolean {
    return this.target.fair;
  }

  /** The holds this handle takes: `[kind, name]` (a multi-lock: several; a fair lock: its `LOCK` hold). */
  get holds(): readonly (readonly ["LOCK" | "READ" | "WRITE", string])[] {
    return this.target.holds;
  }

  // The catch-all overloads repeat EventEmitter's own signatures (`any[]` there).

  /** Subscribes to `lost`: `(owner, cause)`, the hold found gone by the watchdog. */
  override on(event: "lost", listener: (owner: string, cause: unknown) => void): this;
  override on(event: string | symbol, listener: (...args: any[]) => void): this;
  override on(event: string | symbol, listener: (...args: any[]) => void): this {
    return super.on(event, listener);
  }

  /** Subscribes to the next `lost` only. */
  override once(event: "lost", listener: (owner: string, cause: unknown) => void): this;
  override once(event: string | symbol, listener: (...args: any[]) => void): this;
  override once(event: string | symbol, listener: (...args: any[]) => void): this {
    return super.once(event, listener);
  }
}
