/** `CountDownLatch`: Redisson's `RCountDownLatch` on the module's `LATCH.*` commands (design.md §16). */

import { int } from "./commands";
import { acquire, once, type Acquisition, type ClientContext, type WaitOptions } from "./driver";
import { LockError } from "./errors";

/** A count: a whole number from 0 (Java's `CountDownLatch` takes no negative count). */
function countOf(count: number): number {
  if (!Number.isSafeInteger(count) || count < 0) {
    throw new RangeError(`count must be a whole number from 0, not ${String(count)}`);
  }
  return count;
}

/**
 * A count-down latch: a count on the server (the string at `name`,
 * Redisson's `RCountDownLatch`, so Java services on Redisson share it),
 * counted down by anyone; `await` waits until it reaches zero.
 *
 * A wait is one `LATCH.AWAIT … BLOCK` on the server, after one check that
 * does not wait, read on a dedicated connection for as long as it lasts
 * (whatever the application's `commandTimeout`); every waiter is answered
 * the moment the count reaches zero or the latch is deleted. An
 * `AbortSignal` ends the wait on the server. A count-down carries no
 * request id (`LATCH.COUNTDOWN` has none): it goes on a dedicated
 * connection, which never resends, and a lost reply is raised, never sent
 * again (it may have counted down); so do the other writes (`trySetCount`,
 * `delete`).
 *
 * ```ts
 * const done = client.countDownLatch("batch:7");
 * await done.trySetCount(3);
 * // elsewhere, three times: await done.countDown();
 * await done.await({ wait: 60_000 }); // true once the count reached zero
 * ```
 */
export class CountDownLatch {
  /** Made by `Client.countDownLatch`. */
  constructor(
    private readonly ctx: ClientContext,
    readonly name: string,
  ) {
    // Redisson's channel wraps the name in braces: a name with braces
    // would put it in another hash slot than the count (the server refuses it).
    if (typeof name !== "string" || name === "" || /[{}]/.test(name)) {
      throw new LockError(`a latch name must be a non-empty string without braces, not ${JSON.stringify(name)}`);
    }
  }

  /** Sets the count when there is no latch: true when set, false when one exists (nothing changes). */
  async trySetCount(count: number): Promise<boolean> {
    return int(await once(this.ctx, this.name, ["LATCH.TRYSETCOUNT", this.name, countOf(count)])) === 1;
  }

  /**
   * Counts down once; at zero the latch is deleted and every waiter
   * answered. Rejects with the connection's error when the reply was lost:
   * the count-down may have happened, and is not sent again.
   */
  async countDown(): Promise<void> {
    await once(this.ctx, this.name, ["LATCH.COUNTDOWN", this.name]);
  }

  /** The count now (0 without a latch): Redisson's `getCount()`. */
  async getCount(): Promise<number> {
    return int(await this.ctx.links.command(this.name, ["LATCH.COUNT", this.name]));
  }

  /** Deletes the latch, answering its waiters: true when there was one. */
  async delete(): Promise<boolean> {
    return int(await once(this.ctx, this.name, ["LATCH.DELETE", this.name])) === 1;
  }

  /**
   * Waits until the count reaches zero (or the latch is gone): resolves
   * true then, false when the wait ran out first (`wait: 0`: one look;
   * without `wait`: without limit, Redisson's `await()`). Rejects with
   * `signal.reason` when aborted, or ioredis's errors.
   */
  async await(options: WaitOptions = {}): Promise<boolean> {
    const name = this.name;
    const kind: Acquisition = {
      key: name,
      session: false,
      sessionLink: null,
      // A wait writes nothing: no request id, no replica check, nothing to
      // give back; a lost reply is asked again with what is left of the wait.
      writes: false,
      idempotent: false,
      acquireLatch: null,
      command: (blockMs) => (blockMs === null ? ["LATCH.AWAIT", name] : ["LATCH.AWAIT", name, "BLOCK", blockMs]),
      outcome: (reply) => ({ acquired: int(reply) === 1, pttl: null, token: null }),
      undo: () => null,
      abandon: () => null,
      record: () => undefined,
      recover: () => Promise.resolve(),
    };
    return (await acquire(this.ctx, kind, options)).acquired;
  }
}
