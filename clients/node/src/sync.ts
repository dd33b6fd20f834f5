/**
 * Replica acknowledgement of an acquisition, as Redisson's
 * `checkLockSyncedSlaves`: what a client object learned of each master (how
 * many replicas it expects there: the most it ever saw, since `INFO` may
 * only raise it; whether the master writes an AOF and has `WAITAOF`), what
 * an acquisition's pipeline carries after the acquisition for one master
 * (`WAIT`, `WAITAOF`, now and then `INFO`) and how their replies are read.
 *
 * A master paused past its failover and resumed still says `role:master`
 * with `connected_slaves:0` until it is demoted: believing it, an
 * acquisition would be acknowledged by nobody and lost with the demotion.
 */

import { int, parseInfo, type Args } from "./commands";
import type { Settled } from "./link";
import type { ReplicaSync } from "./options";

/** How often a master's INFO is asked again, inside an acquisition's pipeline (ms). */
export const REFRESH_MS = 5_000;

/** `INFO replication persistence`: the replicas and the AOF, in one call. */
export const INFO: Args = ["INFO", "replication", "persistence"];

/** One master's learned state. */
interface Learned {
  /** The most replicas it was ever seen with (`connected_slaves`). */
  replicas: number;
  /** It writes an AOF (`aof_enabled:1`), as it last said. */
  aof: boolean;
  /** False once it refused `WAITAOF` as unknown (before Redis 7.2). */
  waitAof: boolean;
  /** When INFO was last asked (sent), by `performance.now()`. */
  asked: number;
}

/** What follows an acquisition on one master. */
export interface Checks {
  /** `WAIT <replicas>` when more than 0. */
  readonly replicas: number;
  /** `WAITAOF 1 0`. */
  readonly waitAof: boolean;
  /** The fsync is required (`aof: "required"`). */
  readonly aofRequired: boolean;
  /** Why it cannot be acknowledged whatever the replies, or null. */
  readonly unmet: string | null;
  /** `INFO replication persistence`, last. */
  readonly info: boolean;
  /** Each wait's timeout (ms). */
  readonly timeout: number;
}

/** Nothing after the acquisition. */
export const NO_CHECKS: Checks = Object.freeze({ replicas: 0, waitAof: false, aofRequired: false, unmet: null, info: false, timeout: 1 });

/** The commands after the acquisition, in this order. */
export function commandsOf(checks: Checks): Args[] {
  const commands: Args[] = [];
  if (checks.replicas > 0) {
    commands.push(["WAIT", checks.replicas, checks.timeout]);
  }
  if (checks.waitAof) {
    commands.push(["WAITAOF", 1, 0, checks.timeout]);
  }
  if (checks.info) {
    commands.push(INFO);
  }
  return commands;
}

/** How much longer than the acquisition's its replies may take (ms). */
export function extraMs(checks: Checks): number {
  return checks.timeout * ((checks.replicas > 0 ? 1 : 0) + (checks.waitAof ? 1 : 0));
}

/** What a client object learned of the masters it acquired on, by `host:port`. */
export class Masters {
  private readonly learned = new Map<string, Learned>();

  /**
   * The checks for the next acquisition on `master`, or null when the
   * policy needs what nobody asked it yet: ask `INFO`, `learn` it, and plan
   * again. An INFO due again is marked asked now, and rides in this
   * acquisition's pipeline.
   */
  plan(master: string, sync: ReplicaSync, now = performance.now()): Checks | null {
    if (!sync.enabled) {
      return NO_CHECKS;
    }
    const needsInfo = sync.replicas === "auto" || sync.aof === "auto";
    const known = this.learned.get(master);
    if (known === undefined && needsInfo) {
      return null;
    }
    let info = false;
    if (known !== undefined && needsInfo && now - known.asked >= REFRESH_MS) {
      known.asked = now;
      info = true;
    }
    const replicas = sync.replicas === "auto" ? (known?.replicas ?? 0) : sync.replicas;
    const hasWaitAof = known?.waitAof ?? true; // unknown until refused
    let waitAof = false;
    let unmet: string | null = null;
    if (sync.aof === "auto" || sync.aof === true) {
      waitAof = (known?.aof ?? false) && hasWaitAof;
    } else if (sync.aof === "required") {
      waitAof = hasWaitAof;
      unmet = hasWaitAof ? null : "the AOF is required and the master has no WAITAOF";
    }
    return { replicas, waitAof, aofRequired: sync.aof === "required", unmet, info, timeout: sync.timeout };
  }

  /** Takes in `master`'s INFO reply: its replicas only ever rise. */
  learn(master: string, reply: unknown, asked = performance.now()): void {
    const info = parseInfo(reply);
    const replicas = Number(info.get("connected_slaves") ?? "0") || 0;
    let known = this.learned.get(master);
    if (known === undefined) {
      known = { replicas: 0, aof: false, waitAof: true, asked };
      this.learned.set(master, known);
    }
    known.replicas = Math.max(known.replicas, replicas);
    known.aof = info.get("aof_enabled") === "1";
  }

  /** The replicas `"auto"` expects of `master` (0: none learned). */
  expected(master: string): number {
    return this.learned.get(master)?.replicas ?? 0;
  }

  /**
   * Reads the replies of `commandsOf(checks)`, learning what they say of
   * `master` (its INFO, a `WAITAOF` it does not know) whether or not the
   * acquisition was granted. Null when everything expected acknowledged
   * it, else what fell short (ignored by the caller when it was refused).
   */
  read(checks: Checks, replies: readonly Settled[], master: string): string | null {
    let verdict = checks.unmet;
    let at = 0;
    if (checks.replicas > 0) {
      const settled = replies[at++];
      if (settled === undefined || settled.error !== null) {
        throw settled?.error ?? new Error("no reply to WAIT");
      }
      const acknowledged = int(settled.reply);
      if (acknowledged < checks.replicas) {
        verdict ??= `WAIT ${checks.replicas} replied ${acknowledged}`;
      }
    }
    if (checks.waitAof) {
      const settled = replies[at++];
      if (settled === undefined) {
        throw new Error("no reply to WAITAOF");
      }
      if (settled.error !== null) {
        const unknown = /unknown command/i.test(settled.error.message);
        const known = this.learned.get(master);
        if (unknown && known !== undefined) {
          known.waitAof = false;
        }
        // Unknown (before Redis 7.2): WAIT alone, unless the AOF is
        // required. Any other refusal (the AOF turned off since) leaves the
        // fsync unconfirmed.
        if (!unknown || checks.aofRequired) {
          verdict ??= `WAITAOF: ${settled.error.message}`;
        }
      } else {
        const counts = Array.isArray(settled.reply) ? settled.reply : [];
        if (counts.length !== 2 || int(counts[0]) < 1) {
          verdict ??= `WAITAOF 1 0 replied ${JSON.stringify(settled.reply)}`;
        }
      }
    }
    if (checks.info) {
      const settled = replies[at];
      if (settled !== undefined && settled.error === null) {
        this.learn(master, settled.reply);
      }
    }
    return verdict;
  }
}
