/** `Semaphore`: Redisson's `RSemaphore` on the module's `SEMAPHORE.*` commands (design.md §15). */

import { Releasable } from "./dispose";
import { int, prefixed, requestId, type Args, type Outcome } from "./commands";
import { acquire, Latches, once, recoverGrant, release, type Acquisition, type ClientContext, type WaitOptions } from "./driver";
import { LockError, NotAcquired } from "./errors";
import { LATCH_TTL_MS, toMs } from "./options";

/** How many permits one acquisition takes, how long it may wait, and what cancels it. */
export interface PermitOptions extends WaitOptions {
  /** How many permits, taken all at once or none (default 1). */
  permits?: number;
}

/**
 * Permits one acquisition took, for `await using` (`Symbol.asyncDispose`
 * gives them back) or `try … finally { await permits.release() }`.
 */
export class Permits extends Releasable {
  /** `semaphore`: where they were taken; `permits`: how many. */
  constructor(
    readonly semaphore: Semaphore,
    readonly permits: number,
  ) {
    super();
  }

  protected giveBack(): Promise<void> {
    return this.semaphore.release(this.permits);
  }
}

/** A count of permits to take or give back: a whole number from 1. */
export function countOf(permits: number, what = "permits"): number {
  if (!Number.isSafeInteger(permits) || permits < 1) {
    throw new RangeError(`${what} must be a whole number from 1, not ${String(permits)}`);
  }
  return permits;
}

/** A count the semaphore is set to or changed by: any whole number (JavaScript's safe integers). */
export function amountOf(permits: number): number {
  if (!Number.isSafeInteger(permits)) {
    throw new RangeError(`permits must be a whole number, not ${String(permits)}`);
  }
  return permits;
}

/**
 * A semaphore: permits counted on the server (the string at `name`,
 * Redisson's `RSemaphore`, so Java services on Redisson share it). Permits
 * have no owner: anyone may give them back, and they have no lease.
 *
 * A wait is one `SEMAPHORE.ACQUIRE … BLOCK` on the server, after one try
 * that does not wait: waiters are served in arrival order, each taking all
 * its permits at once (a waiter for 3 is never starved by takers of 1),
 * woken by whatever gives permits back. As a lock's: every acquisition and
 * release carries a request id (a lost reply is resent once with the same
 * id: never taken or given back twice), the replica check follows each
 * acquisition (`NotSynced`: given back), and an `AbortSignal` ends the
 * wait on the server. The writes without a request id (`trySetPermits`,
 * `addPermits`, `drainPermits`) go on a dedicated connection, which never
 * resends: a lost reply rejects (it may have run), never runs them twice.
 *
 * ```ts
 * const pool = client.semaphore("backend:slots");
 * await pool.trySetPermits(3);
 * await using permits = await pool.hold({ permits: 2, wait: 5_000 }); // NotAcquired after 5 s
 * ```
 */
export class Semaphore {
  private readonly latches = new Latches();

  /** Made by `Client.semaphore`. */
  constructor(
    private readonly ctx: ClientContext,
    readonly name: string,
  ) {
    if (typeof name !== "string" || name === "") {
      throw new LockError(`a semaphore name must be a non-empty string, not ${JSON.stringify(name)}`);
    }
  }

  /**
   * Takes `permits` (default 1): resolves true when taken, false when the
   * wait ran out first (`wait: 0`: Redisson's `tryAcquire()`; without
   * `wait`: `acquire()`, without limit). Rejects with `NotSynced` (the
   * replicas did not acknowledge it: given back), `signal.reason` when
   * aborted (nothing taken), or ioredis's errors.
   */
  async acquire(options: PermitOptions = {}): Promise<boolean> {
    return (await this.take(options)).acquired;
  }

  /** Takes the permits, or rejects with `NotAcquired` when the wait runs out. The `Permits` give them back. */
  async hold(options: PermitOptions = {}): Promise<Permits> {
    const permits = countOf(options.permits ?? 1);
    if (!(await this.take(options)).acquired) {
      throw new NotAcquired(this.name, null);
    }
    return new Permits(this, permits);
  }

  /**
   * Runs `fn` with the permits taken and gives them back after, whatever
   * `fn` did. Rejects with `NotAcquired` when the wait runs out (fn not run).
   */
  async withPermits<T>(fn: () => T | Promise<T>, options: PermitOptions = {}): Promise<T> {
    const permits = await this.hold(options);
    let result: T;
    try {
      result = await fn();
    } catch (error) {
      await permits.release().catch(() => undefined); // fn's error is the one to see
      throw error;
    }
    await permits.release();
    return result;
  }

  /**
   * Gives `permits` back (default 1; anyone may, as in Redisson), serving
   * the waiters they cover, in order. Its request id makes a resend after a
   * lost reply give nothing back twice; its `DEL` deletes this object's
   * latches.
   */
  async release(permits = 1): Promise<void> {
    const count = countOf(permits);
    const request = requestId();
    const args: Args = ["SEMAPHORE.RELEASE", this.name, count, "REQUEST", request, LATCH_TTL_MS];
    await release(this.ctx, this.name, args, prefixed("redisson_unlock_latch", this.name, request), this.latches);
  }

  /**
   * Sets the count to `permits` when the semaphore has none: true when set,
   * false when it had a count. `ttl` (ms): the semaphore's lifetime
   * (Redisson's `trySetPermits(permits, timeToLive)`).
   */
  async trySetPermits(permits: number, options: { ttl?: number } = {}): Promise<boolean> {
    const args: Args = ["SEMAPHORE.TRYSETPERMITS", this.name, amountOf(permits)];
    if (options.ttl !== undefined) {
      args.push("TTL", toMs(options.ttl, "ttl"));
    }
    return int(await once(this.ctx, this.name, args)) === 1;
  }

  /** Adds `permits` (negative: takes them away, the count may go below 0), serving the waiters they cover. */
  async addPermits(permits: number): Promise<void> {
    await once(this.ctx, this.name, ["SEMAPHORE.ADDPERMITS", this.name, amountOf(permits)]);
  }

  /** Takes every free permit: resolves how many there were (0 without a semaphore). */
  async drainPermits(): Promise<number> {
    return int(await once(this.ctx, this.name, ["SEMAPHORE.DRAIN", this.name]));
  }

  /** The free permits now (0 without a semaphore; below 0 after `addPermits` took away more than were free). */
  async availablePermits(): Promise<number> {
    return int(await this.ctx.links.command(this.name, ["SEMAPHORE.AVAILABLE", this.name]));
  }

  /** One acquisition of `options.permits` through the package's acquisition path. */
  private take(options: PermitOptions): Promise<Outcome> {
    const permits = countOf(options.permits ?? 1);
    const { ctx, name } = this;
    const acquireLatch = (request: string): string => prefixed("redisson_lock_request_latch", name, request);
    // The give-back of a grant carries a request id of its own: a second
    // send of it gives nothing back twice.
    const giveBack = (): Args => ["SEMAPHORE.RELEASE", name, permits, "REQUEST", requestId(), LATCH_TTL_MS];
    const kind: Acquisition = {
      key: name,
      session: false,
      sessionLink: null,
      writes: true,
      idempotent: false,
      command: (blockMs, request, waitMs) => {
        const args: Args = ["SEMAPHORE.ACQUIRE", name, permits];
        if (blockMs !== null) {
          args.push("BLOCK", blockMs);
        }
        if (request !== null) {
          // As a lock's: the release's 13.5 s plus a bounded wait.
          args.push("REQUEST", request, LATCH_TTL_MS + (waitMs ?? 0));
        }
        return args;
      },
      outcome: (reply) => ({ acquired: int(reply) === 1, pttl: null, token: null }),
      acquireLatch,
      undo: giveBack,
      abandon: () => null,
      record: (_outcome, _link, request) => {
        if (request !== null) {
          this.latches.keep(acquireLatch(request));
        }
      },
      recover: async (link, request) => {
        // Permits have no lease: one granted at the moment the wait was
        // cancelled would stay taken for good.
        if (request !== null) {
          await recoverGrant(ctx, name, link, acquireLatch(request), () => ctx.links.command(name, giveBack()));
        }
      },
    };
    return acquire(ctx, kind, options);
  }
}
