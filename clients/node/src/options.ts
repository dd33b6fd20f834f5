/**
 * Defaults and the checks of durations, shared by every lock kind. Every
 * duration of this package is in milliseconds, as ioredis and Node's timers
 * count them.
 */

/** Redisson's `lockWatchdogTimeout`: the lease of a hold taken without one, renewed every third of it. */
export const DEFAULT_WATCHDOG_TIMEOUT = 30_000;

/** Redisson's `slavesSyncTimeout`: how long an acquisition waits for the replicas. */
export const DEFAULT_SYNC_TIMEOUT = 1_000;

/** Added to a blocking call's wait for its reply to arrive before the connection is given up. */
export const REPLY_MARGIN = 5_000;

/** How long the server remembers a release's reply under its request id: Redisson's default. */
export const LATCH_TTL_MS = 13_500;

/** The module's longest lease or wait: ten years. */
export const MAX_MS = 315_360_000_000;

/**
 * After each acquisition, wait for the master's replicas to have it, as
 * Redisson does with `checkLockSyncedSlaves` (on by default), in the
 * acquisition's own round trip: the acquisition, then `WAIT <expected>
 * <timeout>` when replicas are expected and `WAITAOF 1 0 <timeout>` when the
 * master's AOF fsync is waited for, pipelined on its connection. When not
 * every copy acknowledged in time the hold is released and the acquisition
 * rejects with `NotSynced`; so it does when the master refuses the write for
 * want of replicas (`NOREPLICAS`, its `min-replicas-to-write`).
 *
 * How many replicas are expected is never read from the node just written
 * to alone: a master paused past its failover and not yet demoted says it
 * has none. With `replicas: "auto"` the client object learns it from `INFO
 * replication persistence` (once before the first acquisition on a master,
 * one extra round trip; then at most every 5 s inside an acquisition's
 * pipeline) and keeps the highest number it ever saw for that master: a
 * master saying fewer later does not lower it, so its acquisitions fail
 * instead of being acknowledged by nobody. Lowering it takes a new `Client`
 * (or an explicit count).
 */
export interface ReplicaSync {
  /** Off: an acquisition returns as soon as the master has it. Default true. */
  enabled: boolean;
  /** Milliseconds to wait for the replicas (`WAIT`) and the fsync (`WAITAOF`); default 1000. */
  timeout: number;
  /**
   * How many replicas must acknowledge: `"auto"` (default), the most the
   * master was ever seen with; or exactly this many (0: never wait for replicas).
   */
  replicas: number | "auto";
  /**
   * The master's AOF fsync (`WAITAOF 1 0`, Redis 7.2+): `"auto"` (default)
   * where the master says it writes one and has `WAITAOF` (before 7.2,
   * `WAIT` alone); `"required"` always (a master without an AOF or
   * `WAITAOF` fails every acquisition with `NotSynced`); `"off"` never.
   * `true` and `false` are `"auto"` and `"off"`.
   */
  aof: "auto" | "required" | "off" | boolean;
}

/** The replica sync Redisson does by default. */
export const DEFAULT_SYNC: Readonly<ReplicaSync> = Object.freeze({
  enabled: true,
  timeout: DEFAULT_SYNC_TIMEOUT,
  replicas: "auto",
  aof: "auto",
});

/**
 * A duration given by the caller as whole milliseconds for the server,
 * rounded up so a short lease never becomes 0. Throws a `RangeError` naming
 * `what` for anything the module would refuse, before anything is sent.
 */
export function toMs(value: number, what: string, min = 1): number {
  if (typeof value !== "number" || Number.isNaN(value)) {
    throw new TypeError(`${what} must be a number of milliseconds, not ${String(value)}`);
  }
  const ms = Math.ceil(value);
  if (ms < min || ms > MAX_MS) {
    throw new RangeError(`${what} must be from ${min} to ${MAX_MS} ms, not ${value}`);
  }
  return ms;
}

/**
 * A wait as `BLOCK`'s argument: `null`, `undefined` or `Infinity` wait
 * without limit (`BLOCK 0`); 0 does not wait at all (no `BLOCK`: returns
 * null); W waits up to W ms (`BLOCK W`).
 */
export function blockOf(wait: number | null | undefined): number | null {
  if (wait === null || wait === undefined || wait === Infinity) {
    return 0;
  }
  if (wait === 0) {
    return null;
  }
  return toMs(wait, "wait");
}

/** The complete replica sync policy of a partial one, checked. */
export function syncOf(sync: Partial<ReplicaSync> | undefined): ReplicaSync {
  const merged = { ...DEFAULT_SYNC, ...(sync ?? {}) };
  toMs(merged.timeout, "sync.timeout");
  if (merged.replicas !== "auto" && !(Number.isInteger(merged.replicas) && merged.replicas >= 0)) {
    throw new RangeError(`sync.replicas must be "auto" or a whole number from 0, not ${String(merged.replicas)}`);
  }
  const aof = merged.aof === true ? "auto" : merged.aof === false ? "off" : merged.aof;
  if (aof !== "auto" && aof !== "required" && aof !== "off") {
    throw new RangeError(`sync.aof must be "auto", "required" or "off", not ${String(merged.aof)}`);
  }
  return { ...merged, aof };
}

/**
 * What is left of a wait after `elapsedMs`, for a resend: a bounded wait
 * less what went by (none left: one try, no BLOCK); a wait without limit
 * (0) or none (null) stays as it was.
 */
export function remaining(blockMs: number | null, elapsedMs: number): number | null {
  if (blockMs === null || blockMs === 0) {
    return blockMs;
  }
  const left = Math.floor(blockMs - elapsedMs);
  return left >= 1 ? left : null;
}
