/**
 * `Lock`: one lock handle of a client object (`Client`): the plain lock
 * (Redisson's `RLock`), fenced (`RFencedLock`) or not, reentrant or not, a
 * read-write lock's read or write side (`RReadWriteLock`), and, through
 * `MultiLock`, several holds taken as one: what each hold counts, the
 * watchdog and session holds here; the acquisition (a wait on the server,
 * an `AbortSignal`, the resend of a lost reply, replica sync) and the
 * release go through `driver.ts`, as the semaphore's do.
 */

import { EventEmitter } from "node:events";
import { asyncDispose } from "./dispose";
import type { Outcome, Target } from "./commands";
import { acquire, releaseHeld, type Acquisition, type ClientContext, type WaitOptions } from "./driver";
import { NotAcquired, NotHeld, ReleaseUnknown } from "./errors";
import { isReplyError, type Link } from "./link";
import { toMs } from "./options";
import { Watchdog } from "./watchdog";

/** How one acquisition waits and how long the hold lasts. */
export interface AcquireOptions extends WaitOptions {
  /**
   * Milliseconds the hold lasts. `undefined`/`null` (the default): the
   * client object's `watchdogTimeout` (30 s), renewed by the watchdog every
   * third of it while held. Given: no watchdog, the hold ends with it.
   */
  lease?: number | null;
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

  /**
   * Releases this hold (once; a second call does nothing). Rejects with
   * `NotHeld` when it was lost, `ReleaseUnknown` when the last hold's
   * release lost its reply and the lock may have been freed by it or lost
   * before (see `Lock.release`).
   */
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
 * Its acquisitions and releases tell the server how many holds the handle
 * had before them (`HELD`), which makes a resent one idempotent: so a
 * handle's calls must not overlap. Await each acquisition and release
 * before the next one on the same handle; concurrent work takes a handle
 * each (`Client.lock` again: another owner).
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
  // What the last acquisition drove (`acquisition`), for the next with the same lease.
  private kind: (Acquisition & { readonly leaseMs: number; readonly watched: boolean }) | null = null;
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
    // The signal is made for the first hold asking for it: a plain
    // acquire() needs none (an AbortController per hold costs more than
    // the rest of the cycle's bookkeeping).
    this.lostController ??= new AbortController();
    return new Hold(this, outcome.token, this.lostController.signal);
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
   * never taken, already released, or lost; with `ReleaseUnknown` when the
   * last hold's release lost its reply and the resend found nothing held
   * (this release freed it, or the hold was gone before it): the handle
   * holds nothing either way.
   */
  async release(): Promise<void> {
    const { links } = this.ctx;
    const owner = this.owner;
    const wasLost = this.isLost;
    const before = this.heldBefore;
    let reply: unknown;
    let resent = false;
    const link = this.sessionLink;
    if (link !== null) {
      // A session's holds live on their connection: released there, with
      // no HELD (the connection's end would release them anyway).
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
      // HELD: a resend whose first send was done (the owner then holds
      // one less) is answered 0, changing nothing. A multi-lock has no
      // HELD, and a handle holding nothing sends none (1 is the least).
      const held = this.target.multi || before === 0 ? null : before;
      const args = this.target.release(owner, this.leaseMs || this.ctx.watchdogTimeout, held);
      ({ reply, resent } = await releaseHeld(this.ctx, this.target.key, args, held !== null));
    }
    const released = this.target.released(reply);
    if (this.count > 0) {
      this.count -= 1;
      if (released === null || released || this.count <= 0) {
        this.forget();
      }
    }
    if (wasLost) {
      // The watchdog found the hold gone, whatever the release replied.
      throw new NotHeld(`${this.name} is not held by ${owner}`);
    }
    if (released === null && resent && before === 1) {
      // The last hold's release, its reply lost: the first send may have
      // freed it (a last release is never replayed), or nothing was held
      // any more (lease run out, failover, key deleted).
      throw new ReleaseUnknown(
        `${this.name}: the release's reply was lost and the owner no longer holds the lock: this release freed it or the hold was gone before it`,
      );
    }
    if (released === null) {
      throw new NotHeld(`${this.name} is not held by ${owner}`);
    }
  }

  /**
   * The holds of this kind the server counts for this handle's owner as
   * far as this process knows: none once the watchdog found them gone.
   */
  private get heldBefore(): number {
    return this.isLost ? 0 : this.count;
  }

  /** The acquisition (`driver.acquire`), its replica sync, and the bookkeeping of what it took. */
  protected async take(options: AcquireOptions): Promise<Outcome> {
    const watched = options.lease === undefined || options.lease === null;
    const leaseMs = watched ? this.ctx.watchdogTimeout : toMs(options.lease as number, "lease");
    let kind = this.kind;
    if (kind === null || kind.leaseMs !== leaseMs || kind.watched !== watched) {
      kind = this.acquisition(leaseMs, watched);
      this.kind = kind;
    }
    return acquire(this.ctx, kind, options);
  }

  /**
   * What `driver.acquire` sends and records for this handle with a lease
   * of `leaseMs` (`watched`: the watchdog's): kept for the next
   * acquisitions with the same lease (it reads the handle's state when
   * used, none of a call's), rather than made anew each time.
   */
  private acquisition(leaseMs: number, watched: boolean): Acquisition & { readonly leaseMs: number; readonly watched: boolean } {
    const { target, owner, session } = this;
    const handle = this; // for the getter, whose `this` is the object
    return {
      leaseMs,
      watched,
      key: target.key,
      session,
      get sessionLink(): Link | null {
        return handle.sessionLink;
      },
      writes: true,
      // A single lock's lost reply is resent as it was. Its HELD has the
      // server answer a granted first send as granted. A session's carries
      // none: a resend could reach the server before it gave back what the
      // closed connection held, find the first send's grant and be taken
      // for it; sent plain it takes a hold of its own, and the give-back
      // then takes the dead connection's.
      idempotent: !target.multi,
      command: (blockMs, _request, waitMs) => target.acquire(owner, leaseMs, blockMs, session, session ? null : this.heldBefore, waitMs),
      outcome: (reply, blockMs) => target.outcome(reply, blockMs),
      acquireLatch: null,
      undo: () => target.release(owner, leaseMs, null),
      abandon: (waitMs) => target.abandon(owner, waitMs),
      record: (outcome, link) => this.record(outcome, leaseMs, watched, session ? link : null),
      recover: async () => {
        // A handle holding nothing gives back whatever it may have got.
        if (this.count === 0) {
          await this.ctx.links.command(target.key, target.release(owner, leaseMs, null)).catch(() => undefined);
        }
      },
    };
  }

  /** Counts a hold taken (`link`: the session's connection, kept for it). */
  private record(outcome: Outcome, leaseMs: number, watched: boolean, link: Link | null): void {
    if (this.isLost) {
      // The holds the watchdog found gone are gone on the server: this is
      // the first of a new series.
      this.count = 0;
    }
    if (this.count === 0) {
      // A new series: its holds' signal (`hold`) is a new one.
      this.lostController = null;
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

  /** Drops every hold of this handle: stops the watchdog, gives the session's connection back. */
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
