/**
 * `PermitExpirableSemaphore`: Redisson's `RPermitExpirableSemaphore` on
 * the module's `PERMIT.*` commands (design.md §17).
 */

import { EventEmitter } from "node:events";
import { Releasable } from "./dispose";
import { int, prefixed, type Args } from "./commands";
import { acquire, Latches, once, recoverGrant, release, type Acquisition, type ClientContext, type WaitOptions } from "./driver";
import { LockError, NotAcquired, NotHeld } from "./errors";
import { LATCH_TTL_MS, toMs } from "./options";
import { amountOf, countOf } from "./semaphore";
import { Watchdog } from "./watchdog";

/** How many permits one acquisition takes, their lease, how long it may wait, and what cancels it. */
export interface PermitAcquireOptions extends WaitOptions {
  /** How many permits, taken all at once or none, each with its own id (default 1). */
  permits?: number;
  /**
   * Milliseconds each permit lasts; -1: it never expires (Redisson's
   * `acquire()` without a lease). `undefined`/`null` (the default): the
   * client object's `watchdogTimeout`, renewed by the watchdog
   * (`PERMIT.UPDATELEASE`) every third of it until released.
   */
  lease?: number | null;
}

/** Called when the watchdog found permits gone: their ids, and the error when the server was unreachable. */
export type PermitsLostCallback = (ids: readonly string[], cause: unknown) => void;

/**
 * The ids one acquisition took, for `await using` (`Symbol.asyncDispose`
 * releases them) or `try … finally { await permits.release() }`.
 */
export class PermitIds extends Releasable {
  /**
   * `semaphore`: where they were taken; `ids`: one per permit; `signal`:
   * aborted (with a `NotHeld` reason) if the watchdog finds them gone, for
   * the work to stop.
   */
  constructor(
    readonly semaphore: PermitExpirableSemaphore,
    readonly ids: readonly string[],
    readonly signal: AbortSignal,
  ) {
    super();
  }

  /** Releases the ids; `release()` rejects with `NotHeld` when none was released. */
  protected giveBack(): Promise<void> {
    return this.semaphore.release(this.ids);
  }
}

/** The ids a watchdog renews: what is left of one acquisition's, and what tells its work they were lost. */
interface Watched {
  readonly ids: Set<string>;
  readonly dog: Watchdog;
  readonly lost: AbortController;
}

/** An acquisition's reply: its ids (an array, one per permit), or null when refused (the nearest expiry, or nil). */
function idsOf(reply: unknown): string[] | null {
  if (Array.isArray(reply)) {
    return reply.map(String);
  }
  if (reply !== null && reply !== undefined) {
    int(reply); // a refusal's nearest expiry; anything else is no reply of PERMIT.ACQUIRE (LockError)
  }
  return null;
}

/** Ids to release: one, or a non-empty list, each a non-empty string. */
function idList(ids: string | readonly string[]): string[] {
  const list = typeof ids === "string" ? [ids] : [...ids];
  if (list.length === 0 || list.some((id) => typeof id !== "string" || id === "")) {
    throw new RangeError(`permit ids must be non-empty strings, at least one: ${JSON.stringify(ids)}`);
  }
  return list;
}

/**
 * A permit-expirable semaphore: the free count on the server (the string
 * at `name`) and the permits taken, each an id in the sorted set
 * `{name}:timeout` scored with its expiry (Redisson's
 * `RPermitExpirableSemaphore`, so Java services on Redisson share it).
 * A permit is released by its id, by anyone who has it; one whose lease
 * runs out comes back by itself, and the server serves the waiters then.
 * Emits `lost` (`(ids, cause)`) when the watchdog finds permits gone.
 *
 * A wait is one `PERMIT.ACQUIRE … BLOCK` on the server, after one try that
 * does not wait, in arrival order, as the `Semaphore`'s; so are the request
 * ids (a lost reply resent once with the same id gets the same ids back and
 * takes nothing), the replica check (`NotSynced`: released again) and the
 * `AbortSignal`. `PERMIT.RELEASE` carries no request id: a lost reply
 * rejects and is not sent again (a resend could not tell its own release
 * from an expiry). The writes without a request id (`trySetPermits`, `setPermits`,
 * `addPermits`, `updateLeaseTime`, `tryRelease`) go on a dedicated
 * connection, which never resends.
 *
 * ```ts
 * const pool = client.permitExpirableSemaphore("backend:slots");
 * await pool.trySetPermits(3);
 * await using permits = await pool.hold({ lease: 60_000, wait: 5_000 }); // NotAcquired after 5 s
 * ```
 */
export class PermitExpirableSemaphore extends EventEmitter {
  private readonly latches = new Latches();
  private readonly watched = new Map<string, Watched>();

  /** Made by `Client.permitExpirableSemaphore`; `onLost` is called besides the `lost` event. */
  constructor(
    private readonly ctx: ClientContext,
    readonly name: string,
    private readonly onLost?: PermitsLostCallback,
  ) {
    super();
    if (typeof name !== "string" || name === "") {
      throw new LockError(`a semaphore name must be a non-empty string, not ${JSON.stringify(name)}`);
    }
  }

  /**
   * Takes `permits` (default 1): resolves their ids, or null when the wait
   * ran out first (`wait: 0`: Redisson's `tryAcquire()`; without `wait`:
   * `acquire()`, without limit). Rejects with `NotSynced` (the replicas
   * did not acknowledge it: released again), `signal.reason` when aborted
   * (nothing taken), or ioredis's errors.
   */
  async acquire(options: PermitAcquireOptions = {}): Promise<string[] | null> {
    return (await this.take(options)).ids;
  }

  /** Takes the permits, or rejects with `NotAcquired` when the wait runs out. The `PermitIds` release them. */
  async hold(options: PermitAcquireOptions = {}): Promise<PermitIds> {
    const { ids, lost } = await this.take(options);
    if (ids === null) {
      throw new NotAcquired(this.name, null);
    }
    return new PermitIds(this, ids, lost);
  }

  /**
   * Runs `fn` with the permits' ids and releases them after, whatever `fn`
   * did. Rejects with `NotAcquired` when the wait runs out (fn not run).
   */
  async withPermits<T>(fn: (ids: readonly string[]) => T | Promise<T>, options: PermitAcquireOptions = {}): Promise<T> {
    const permits = await this.hold(options);
    let result: T;
    try {
      result = await fn(permits.ids);
    } catch (error) {
      await permits.release().catch(() => undefined); // fn's error is the one to see
      throw error;
    }
    await permits.release();
    return result;
  }

  /**
   * Releases the permits `ids`, all or none (Redisson's `release(ids)`),
   * serving the waiters they cover. Rejects with `NotHeld` when none was
   * released (one is not held: released already, or its lease ran out).
   * Its `DEL` deletes this object's acquisitions' latches.
   */
  async release(ids: string | readonly string[]): Promise<void> {
    const list = idList(ids);
    this.unwatch(list);
    const args: Args = ["PERMIT.RELEASE", this.name, ...list];
    if (int(await release(this.ctx, this.name, args, null, this.latches)) === 0) {
      throw new NotHeld(`${this.name}: permit ${list.join(", ")} not held (released, or its lease ran out)`);
    }
  }

  /**
   * Releases one permit (Redisson's `tryRelease(id)`): true when it was
   * held; false when its lease had run out (it came back all the same) or
   * it is not held.
   */
  async tryRelease(id: string): Promise<boolean> {
    const [one] = idList(id);
    this.unwatch([one!]);
    return int(await once(this.ctx, this.name, ["PERMIT.TRYRELEASE", this.name, one!])) === 1;
  }

  /**
   * Gives a held permit a new lease from now (ms; -1: it never expires),
   * as Redisson's `updateLeaseTime`: true when it is held. The watchdog
   * stops renewing it.
   */
  async updateLeaseTime(id: string, lease: number): Promise<boolean> {
    const [one] = idList(id);
    const ms = leaseOf(lease);
    this.unwatch([one!]);
    return int(await once(this.ctx, this.name, ["PERMIT.UPDATELEASE", this.name, one!, ms])) === 1;
  }

  /** The ms a permit has left: -1 when it never expires, 0 when it is not held (where Redisson's `getLeaseTime` throws). */
  async leaseTime(id: string): Promise<number> {
    const [one] = idList(id);
    return int(await this.ctx.links.command(this.name, ["PERMIT.LEASETIME", this.name, one!]));
  }

  /** Sets the free count to `permits` when the semaphore has none: true when set, false when it had a count. */
  async trySetPermits(permits: number): Promise<boolean> {
    return int(await once(this.ctx, this.name, ["PERMIT.TRYSETPERMITS", this.name, amountOf(permits)])) === 1;
  }

  /** Makes free plus taken `permits` (Redisson's `setPermits`), serving the waiters it covers. */
  async setPermits(permits: number): Promise<void> {
    await once(this.ctx, this.name, ["PERMIT.SETPERMITS", this.name, amountOf(permits)]);
  }

  /** Adds `permits` (negative: takes them away, the count may go below 0), serving the waiters they cover. */
  async addPermits(permits: number): Promise<void> {
    await once(this.ctx, this.name, ["PERMIT.ADDPERMITS", this.name, amountOf(permits)]);
  }

  /** The free permits now, expired ones counted back (0 without a semaphore). */
  async availablePermits(): Promise<number> {
    return int(await this.ctx.links.command(this.name, ["PERMIT.AVAILABLE", this.name]));
  }

  /** The permits taken now, expired ones not counted. */
  async acquiredPermits(): Promise<number> {
    return int(await this.ctx.links.command(this.name, ["PERMIT.ACQUIRED", this.name]));
  }

  /** Free plus taken (Redisson's `getPermits`). */
  async getPermits(): Promise<number> {
    return int(await this.ctx.links.command(this.name, ["PERMIT.PERMITS", this.name]));
  }

  /** One acquisition through the package's acquisition path: its ids (null: refused) and its lost signal. */
  private async take(options: PermitAcquireOptions): Promise<{ ids: string[] | null; lost: AbortSignal }> {
    const permits = countOf(options.permits ?? 1);
    const watched = options.lease === undefined || options.lease === null;
    const leaseMs = watched ? this.ctx.watchdogTimeout : leaseOf(options.lease as number);
    const { ctx, name } = this;
    const acquireLatch = (request: string): string => prefixed("redisson_lock_request_latch", name, request);
    const command = (blockMs: number | null, request: string | null, waitMs: number | null): Args => {
      const args: Args = ["PERMIT.ACQUIRE", name, permits, leaseMs];
      if (blockMs !== null) {
        args.push("BLOCK", blockMs);
      }
      if (request !== null) {
        // As a lock's: the release's 13.5 s plus a bounded wait.
        args.push("REQUEST", request, LATCH_TTL_MS + (waitMs ?? 0));
      }
      return args;
    };
    // The ids of the latest reply: what a give-back releases.
    let ids: string[] | null = null;
    let lost = new AbortController().signal;
    const kind: Acquisition = {
      key: name,
      session: false,
      sessionLink: null,
      writes: true,
      idempotent: false,
      command,
      outcome: (reply) => {
        ids = idsOf(reply);
        return { acquired: ids !== null, pttl: null, token: null };
      },
      acquireLatch,
      undo: () => (ids === null ? null : ["PERMIT.RELEASE", name, ...ids]),
      abandon: () => null,
      record: (_outcome, _link, request) => {
        if (request !== null) {
          this.latches.keep(acquireLatch(request));
        }
        if (watched && ids !== null) {
          lost = this.watch(ids, leaseMs);
        }
      },
      recover: async (link, request) => {
        // A permit granted at the moment the wait was cancelled would stay
        // taken until its lease ends (for good with -1): the same request
        // id replays its ids, which are released.
        if (request !== null) {
          await recoverGrant(ctx, name, link, acquireLatch(request), async () => {
            const granted = idsOf(await ctx.links.command(name, command(null, request, null)));
            if (granted !== null) {
              await ctx.links.command(name, ["PERMIT.RELEASE", name, ...granted]);
            }
          });
        }
      },
    };
    const outcome = await acquire(ctx, kind, options);
    return { ids: outcome.acquired ? ids : null, lost };
  }

  /** Starts the watchdog of one acquisition's `ids`, renewing each to `leaseMs` every third of it; returns its lost signal. */
  private watch(ids: readonly string[], leaseMs: number): AbortSignal {
    const entry: Watched = {
      ids: new Set(ids),
      lost: new AbortController(),
      dog: new Watchdog(
        leaseMs,
        async () => {
          const renewed = [...entry.ids];
          const replies = await Promise.all(renewed.map((id) => this.ctx.links.command(this.name, ["PERMIT.UPDATELEASE", this.name, id, leaseMs])));
          // An id released meanwhile (taken off before its release was
          // sent) answers 0 and is not lost.
          return replies.every((reply, i) => int(reply) === 1 || !entry.ids.has(renewed[i]!));
        },
        (cause) => this.markLost(entry, cause),
      ),
    };
    for (const id of ids) {
      this.watched.set(id, entry);
    }
    this.ctx.dogs.add(entry.dog);
    entry.dog.start();
    return entry.lost.signal;
  }

  /** Stops renewing `ids`: an acquisition's watchdog stops with its last id. */
  private unwatch(ids: readonly string[]): void {
    for (const id of ids) {
      const entry = this.watched.get(id);
      if (entry === undefined) {
        continue;
      }
      this.watched.delete(id);
      entry.ids.delete(id);
      if (entry.ids.size === 0) {
        entry.dog.stop();
        this.ctx.dogs.delete(entry.dog);
      }
    }
  }

  private markLost(entry: Watched, cause: unknown): void {
    const ids = [...entry.ids];
    if (ids.length === 0) {
      return; // all released while the last renewal was on its way
    }
    this.unwatch(ids);
    entry.lost.abort(new NotHeld(`${this.name}: permits ${ids.join(", ")} were lost`, { cause }));
    this.emit("lost", ids, cause);
    this.onLost?.(ids, cause);
  }

  // The catch-all overloads repeat EventEmitter's own signatures (`any[]` there).

  /** Subscribes to `lost`: `(ids, cause)`, permits found gone by the watchdog. */
  override on(event: "lost", listener: (ids: readonly string[], cause: unknown) => void): this;
  override on(event: string | symbol, listener: (...args: any[]) => void): this;
  override on(event: string | symbol, listener: (...args: any[]) => void): this {
    return super.on(event, listener);
  }

  /** Subscribes to the next `lost` only. */
  override once(event: "lost", listener: (ids: readonly string[], cause: unknown) => void): this;
  override once(event: string | symbol, listener: (...args: any[]) => void): this;
  override once(event: string | symbol, listener: (...args: any[]) => void): this {
    return super.once(event, listener);
  }
}

/** A permit's lease: -1 (never expires) or a duration in ms. */
function leaseOf(lease: number): number {
  return lease === -1 ? -1 : toMs(lease, "lease");
}
