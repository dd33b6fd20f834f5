/**
 * What each kind of lock sends and how its replies read: no I/O here. The
 * lock classes carry these commands over a connection.
 */

import { randomUUID } from "node:crypto";
import { LockError } from "./errors";

/** A command and its arguments, as `redis.call(...)` takes them. */
export type Args = [string, ...(string | number)[]];

/** The kind of one hold of a multi-lock: a plain lock, or a read-write lock's read or write side. */
export type HoldKind = "LOCK" | "READ" | "WRITE";

/** One hold of a multi-lock: its kind and the lock's name. */
export type HoldSpec = readonly [HoldKind, string];

const KINDS: readonly HoldKind[] = ["LOCK", "READ", "WRITE"];

/** An acquisition's reply: taken (with its fencing token when fenced), or the PTTL of what is in the way. */
export interface Outcome {
  /** Whether the hold was taken. */
  acquired: boolean;
  /** Refused: the lease the holds in the way had left (ms). */
  pttl: number | null;
  /** Taken with `FENCED`: the fencing token. */
  token: number | null;
}

/** Whether a reply is the server's nil. */
function isNil(reply: unknown): boolean {
  return reply === null || reply === undefined;
}

/** An integer reply (ioredis gives numbers, or strings with `stringNumbers`). */
export function int(reply: unknown): number {
  const n = typeof reply === "string" ? Number(reply) : reply;
  if (typeof n !== "number" || !Number.isFinite(n)) {
    throw new LockError(`unexpected reply ${JSON.stringify(reply)}: an integer was expected`);
  }
  return n;
}

/** A random request id for a semaphore's release or acquisition (Redisson sends a UUID). */
export function requestId(): string {
  return randomUUID().replace(/-/g, "");
}

/**
 * The lock (or the multi-lock's locks) one lock object takes, and how:
 * builds its commands and reads their replies. `key` routes every command
 * (in a cluster, a multi-lock's names share its slot).
 */
export class Target {
  /** The holds: one for a single lock, several for a multi-lock. */
  readonly holds: readonly HoldSpec[];

  /**
   * `holds`: what is taken; `multi`: taken with `LOCK.ACQUIREALL`;
   * `fenced`: each acquisition takes a fencing token; `reentrant`: false
   * sends `NOREENTRY`; `fair`: the one `LOCK` hold is a fair lock's
   * (`FAIRLOCK.*`; its hash is a plain lock's, `LOCK.RENEW` renews it),
   * `fairWait` its `WAIT` (null: the server's `rwlock.fair-wait`).
   */
  constructor(
    holds: readonly HoldSpec[],
    readonly multi: boolean,
    readonly fenced = false,
    readonly reentrant = true,
    readonly fair = false,
    readonly fairWait: number | null = null,
  ) {
    if (holds.length === 0) {
      throw new LockError("a MultiLock needs at least one hold");
    }
    for (const [kind, name] of holds) {
      if (!KINDS.includes(kind)) {
        throw new LockError(`unknown hold kind ${JSON.stringify(kind)}: one of ${KINDS.join(", ")}`);
      }
      if (typeof name !== "string" || name === "") {
        throw new LockError(`a lock name must be a non-empty string, not ${JSON.stringify(name)}`);
      }
    }
    if (!multi && holds.length !== 1) {
      throw new LockError("a single lock has exactly one hold");
    }
    if (fair && (multi || fenced || holds[0]![0] !== "LOCK")) {
      throw new LockError("a fair lock is one plain hold, never fenced");
    }
    this.holds = holds.map(([kind, name]) => [kind, name] as const);
  }

  /** The name that routes every command: the first hold's. */
  get key(): string {
    return this.holds[0]![1];
  }

  /** The single lock's kind. */
  private get kind(): HoldKind {
    return this.holds[0]![0];
  }

  private holdArgs(): (string | number)[] {
    const args: (string | number)[] = ["HOLDS", this.holds.length];
    for (const [kind, name] of this.holds) {
      args.push(kind, name);
    }
    return args;
  }

  /**
   * `… lease [BLOCK ms] [SESSION] [HELD n] [FENCED] [NOREENTRY]`
   * (`blockMs` null: no BLOCK; `waitMs`: the bounded wait asked for, which
   * a resend's smaller `blockMs` keeps; `held`: the owner's holds of this
   * kind before the call, null: no HELD). With `HELD n` the server answers
   * a resend whose first send was granted (the owner then holds n + 1) as
   * a grant and changes nothing, so a lost reply is resent as it is. A
   * multi-lock (`LOCK.ACQUIREALL` has no `HELD`) never sends it. A fair
   * lock's try (no wait) is Redisson's `tryLock()`, `NOQUEUE`: it never
   * joins the line; a wait joins it and waits in it on the server.
   */
  acquire(owner: string, leaseMs: number, blockMs: number | null, session: boolean, held: number | null = null, waitMs: number | null = blockMs || null): Args {
    const heldArgs = held === null || this.multi ? [] : ["HELD", held];
    if (this.fair) {
      const args: Args = ["FAIRLOCK.ACQUIRE", this.key, owner, leaseMs, ...this.waitArgs(waitMs)];
      args.push(...(blockMs === null ? ["NOQUEUE"] : ["BLOCK", blockMs]));
      if (!this.reentrant) {
        args.push("NOREENTRY");
      }
      args.push(...heldArgs);
      return args;
    }
    const options: (string | number)[] = [];
    if (blockMs !== null) {
      options.push("BLOCK", blockMs);
    }
    if (session) {
      options.push("SESSION");
    }
    if (this.multi) {
      return ["LOCK.ACQUIREALL", owner, leaseMs, ...options, ...this.holdArgs()];
    }
    options.push(...heldArgs);
    if (this.fenced) {
      options.push("FENCED");
    }
    if (this.kind === "LOCK") {
      if (!this.reentrant) {
        options.push("NOREENTRY");
      }
      return ["LOCK.ACQUIRE", this.key, owner, leaseMs, ...options];
    }
    return [`RWLOCK.${this.kind}`, this.key, owner, leaseMs, ...options];
  }

  /**
   * A fair acquisition's `WAIT`, as Redisson's `tryLockInnerAsync` picks it:
   * a bounded wait is its own thread wait time, otherwise the lock's
   * `fairWait` (null: none sent, the server's default).
   */
  private waitArgs(waitMs: number | null): (string | number)[] {
    const wait = waitMs ?? this.fairWait;
    return wait === null ? [] : ["WAIT", wait];
  }

  /**
   * What takes `owner` out of a fair lock's line a failed wait (of
   * `waitMs`, null: without limit) may have left it in (`FAIRLOCK.CANCEL`,
   * Redisson's `acquireFailed`, with the acquisition's `WAIT`); null for the
   * other kinds, whose waiters the server drops with their connection.
   */
  abandon(owner: string, waitMs: number | null = null): Args | null {
    return this.fair ? ["FAIRLOCK.CANCEL", this.key, owner, ...this.waitArgs(waitMs)] : null;
  }

  /**
   * An acquisition's reply: nil (or `[-1, token]` when fenced) = taken, else
   * the PTTL in the way (a fair try's refusal, 1, is none: `pttl` null).
   */
  outcome(reply: unknown, blockMs: number | null = 0): Outcome {
    if (this.fair && blockMs === null && !isNil(reply)) {
      int(reply);
      return { acquired: false, pttl: null, token: null };
    }
    if (this.fenced && !this.multi) {
      if (!Array.isArray(reply) || reply.length !== 2) {
        throw new LockError(`unexpected reply to a fenced acquisition: ${JSON.stringify(reply)}`);
      }
      const pttl = int(reply[0]);
      const token = int(reply[1]);
      return token === -1
        ? { acquired: false, pttl, token: null }
        : { acquired: true, pttl: null, token };
    }
    if (isNil(reply)) {
      return { acquired: true, pttl: null, token: null };
    }
    return { acquired: false, pttl: int(reply), token: null };
  }

  /**
   * A release. A hold still held after it (re-entered) lasts `leaseMs`
   * again, as Redisson's unlock re-arms it. `held` (single locks): the
   * owner's holds of this kind before it, null: no HELD. With `HELD n`,
   * n >= 2, the server answers a resend whose first send was done (the
   * owner then holds n - 1) with 0 and changes nothing; a last release
   * (n = 1) is never replayed: its resend's nil cannot tell "this release
   * freed it" from "the hold was gone before it". So `HELD 1` is not sent:
   * the server would run it as without, and the cycle is two arguments
   * shorter.
   */
  release(owner: string, leaseMs: number, held: number | null): Args {
    if (this.multi) {
      return ["LOCK.UNLOCKALL", owner, ...this.holdArgs()];
    }
    const args: Args = this.fair
      ? ["FAIRLOCK.UNLOCK", this.key, owner]
      : this.kind === "LOCK"
        ? ["LOCK.UNLOCK", this.key, owner]
        : ["RWLOCK.UNLOCK", this.key, owner, this.kind];
    args.push("LEASE", leaseMs);
    if (held !== null && held !== 1) {
      args.push("HELD", held);
    }
    return args;
  }

  /**
   * A release's reply: null when the owner held nothing (a multi-lock: any
   * of its holds), true when released, false when still held (re-entered).
   */
  released(reply: unknown): boolean | null {
    if (this.multi) {
      if (!Array.isArray(reply)) {
        throw new LockError(`unexpected reply to LOCK.UNLOCKALL: ${JSON.stringify(reply)}`);
      }
      if (reply.some(isNil)) {
        return null;
      }
      return reply.every((r) => int(r) === 1);
    }
    return isNil(reply) ? null : int(reply) === 1;
  }

  /** The watchdog's call. */
  renew(owner: string, leaseMs: number): Args {
    if (this.multi) {
      return ["LOCK.RENEWALL", owner, leaseMs, ...this.holdArgs()];
    }
    return [this.kind === "LOCK" ? "LOCK.RENEW" : "RWLOCK.RENEW", this.key, owner, leaseMs];
  }

  /** Whether every hold is still the owner's. */
  renewed(reply: unknown): boolean {
    if (Array.isArray(reply)) {
      return reply.every((r) => !isNil(r) && int(r) === 1);
    }
    return int(reply) === 1;
  }
}

/**
 * A latch's key, `prefix:{name}:request`, or `prefix:name:request` when the
 * name holds a `{tag}` already (the key keeps its slot): prefix
 * `redisson_unlock_latch` for a release's, `redisson_lock_request_latch`
 * for an acquisition's.
 */
export function prefixed(prefix: string, name: string, request: string): string {
  return name.includes("{") ? `${prefix}:${name}:${request}` : `${prefix}:{${name}}:${request}`;
}

/** The `field:value` lines of an INFO reply. */
export function parseInfo(reply: unknown): Map<string, string> {
  const fields = new Map<string, string>();
  for (const line of String(reply).split(/\r?\n/)) {
    const at = line.indexOf(":");
    if (at > 0 && !line.startsWith("#")) {
      fields.set(line.slice(0, at).trim(), line.slice(at + 1).trim());
    }
  }
  return fields;
}
