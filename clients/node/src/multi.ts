/** `MultiLock`: several holds taken, renewed and released as one (`LOCK.ACQUIREALL`). */

import { Target, type HoldSpec } from "./commands";
import type { ClientContext } from "./driver";
import { Lock, type HandleOptions } from "./lock";

/** What a multi-lock holds: lock handles (their kind and name) or `[kind, name]` pairs (kind in either case). */
export type MultiHold = Lock | HoldSpec | readonly [Lowercase<HoldSpec[0]>, string];

/**
 * Redisson's `RedissonMultiLock`, atomic on the server: `LOCK.ACQUIREALL`
 * takes every hold or none (a wait waits for all of them at once),
 * `LOCK.RENEWALL` renews them, `LOCK.UNLOCKALL` releases them. In a
 * cluster every name must share one hash slot: give them one `{tag}`.
 * Its acquisitions and releases carry no `HELD` (the commands take none):
 * a lost reply the handle sees is raised, not resent.
 */
export class MultiLock extends Lock {
  /** Made by `Client.multiLock`. */
  constructor(ctx: ClientContext, holds: readonly MultiHold[], owner: string, options: HandleOptions) {
    super(ctx, new Target(holds.map(holdOf), true), owner, options);
  }
}

/** The `[kind, name]` of a lock handle or a pair (kind upper-cased). */
function holdOf(hold: MultiHold): HoldSpec {
  if (hold instanceof Lock) {
    if (hold instanceof MultiLock || hold.holds.length !== 1) {
      throw new TypeError("a MultiLock cannot hold another MultiLock");
    }
    if (hold.fair) {
      throw new TypeError("a MultiLock cannot hold a fair lock (LOCK.ACQUIREALL has no fair holds)");
    }
    return hold.holds[0]!;
  }
  if (!Array.isArray(hold) || hold.length !== 2) {
    throw new TypeError(`a MultiLock holds lock handles or [kind, name] pairs, not ${JSON.stringify(hold)}`);
  }
  return [String(hold[0]).toUpperCase() as HoldSpec[0], hold[1]];
}
