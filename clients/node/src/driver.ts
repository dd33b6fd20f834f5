/**
 * The one acquisition path every kind's handle drives (locks, the
 * semaphore, the latch's wait), and the two release paths (a lock's, one
 * command with `HELD`; a semaphore's, with its request id and the `DEL` of
 * its latches): the try on the client object's own connection, the wait on the
 * server (`BLOCK`) on a dedicated connection, the one resend of a lost
 * reply (made idempotent by a lock's `HELD` or a semaphore's request id),
 * the replica check (`NotSynced`), cancellation by `AbortSignal`. What
 * differs by kind (the commands, what a reply means, what a grant
 * records) is the kind's `Acquisition`; the I/O and its rules are here,
 * once.
 */

import { int, requestId, type Args, type Outcome } from "./commands";
import { NotReentrant, NotSynced } from "./errors";
import { isMoved, isReplyError, type Link, type Links, type Settled } from "./link";
import { blockOf, LATCH_TTL_MS, remaining, type ReplicaSync } from "./options";
import { commandsOf, extraMs, INFO, NO_CHECKS, type Checks, type Masters } from "./sync";
import type { Watchdog } from "./watchdog";

/** What a handle needs of its client object (`Client`). */
export interface ClientContext {
  /** The client object's own connections and the pool of dedicated ones. */
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
  /** How many of this client object's acquisitions wait on the server (`BLOCK`), per key. */
  readonly waiters: Map<string, number>;
}

/** How long one acquisition may wait, and what cancels it. */
export interface WaitOptions {
  /**
   * Milliseconds to wait, on the server (`BLOCK`), never by polling:
   * `undefined`, `null` or `Infinity` wait without limit (the default), 0
   * tries once. Any wait works whatever the application's `commandTimeout`:
   * the reply is read on a dedicated connection.
   */
  wait?: number | null;
  /**
   * Aborting it ends the wait on the server (`CLIENT UNBLOCK`): the call
   * rejects with `signal.reason` and holds nothing.
   */
  signal?: AbortSignal;
}

/** One acquisition of one kind: what it sends, what its replies mean, what a grant records. */
export interface Acquisition {
  /** The key: routes every command, counts this client object's waiters, names errors. */
  readonly key: string;
  /** `SESSION` holds: sent on a dedicated connection, kept while held. */
  readonly session: boolean;
  /** The session's connection while it holds (its re-entries go there), else null. */
  readonly sessionLink: Link | null;
  /**
   * Whether a grant writes: the replicas must acknowledge it (`WAIT`,
   * `WAITAOF`), and a lost reply is resent only with a request id or when
   * `idempotent`. One that writes nothing (the latch's wait) is asked
   * again as it is.
   */
  readonly writes: boolean;
  /**
   * Whether the command, sent again as it is after a lost reply, cannot
   * take a second hold: a lock's `HELD n` (a granted first send leaves the
   * owner n + 1 holds, and the server answers the resend as a grant,
   * changing nothing) and a session's (the closed connection's holds are
   * given back by the server: the resend simply takes one).
   */
  readonly idempotent: boolean;
  /**
   * The acquisition (`blockMs` null: no `BLOCK`; `request` null: no
   * `REQUEST`; `waitMs`: the bounded wait asked for, which a resend's
   * smaller `blockMs` keeps). Built at each send: a lock's `HELD` says
   * what the owner held then.
   */
  command(blockMs: number | null, request: string | null, waitMs: number | null): Args;
  /** Its reply (`blockMs`: null for a try). */
  outcome(reply: unknown, blockMs: number | null): Outcome;
  /**
   * The server's latch of an acquisition sent with `request` (design.md
   * §14.7); null: it sends no `REQUEST id ttl`. With one, a lost reply is
   * resent once with the same id.
   */
  readonly acquireLatch: ((request: string) => string) | null;
  /** What gives back a grant just made (aborted meanwhile, or not acknowledged); null: a grant takes nothing. */
  undo(): Args | null;
  /** What takes the caller out of a line a failed wait may have left it in (a fair lock's), or null. */
  abandon(waitMs: number | null): Args | null;
  /** Records a grant (`link`: the dedicated connection it came on, null: the own one; `request`: its latch to delete, null: none). */
  record(outcome: Outcome, link: Link | null, request: string | null): void;
  /**
   * After an abort that closed `link` (null: the try on the own
   * connection) before its reply came: gives back what the server may have
   * granted at that moment (`request`: the acquisition's id, null: none).
   */
  recover(link: Link | null, request: string | null): Promise<void>;
}

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

/**
 * Drives `kind`'s acquisition: its first attempt does not wait, on the
 * client object's own connection (`tryShared`), unless it is a session's or the
 * replica check waits on this master. Only when that attempt was refused
 * and the caller may wait does it wait on the server (`BLOCK`), on a
 * dedicated connection. A wait while another acquisition of this client
 * object waits on the same key skips the try: the key is taken, and what
 * frees would be handed to the waiter first in line, so the try would only
 * cost a round trip (each handle of a contended lock, after its release,
 * again). Rejects with `NotReentrant`, `NotSynced` (released again),
 * `signal.reason` when aborted (holding nothing), or ioredis's errors.
 */
export async function acquire(ctx: ClientContext, kind: Acquisition, options: WaitOptions): Promise<Outcome> {
  const { links } = ctx;
  let blockMs = blockOf(options.wait);
  const signal = options.signal;
  signal?.throwIfAborted();
  // A fresh request id per acquisition of a semaphore: its one resend
  // below is answered from the server's latch.
  let request = kind.acquireLatch !== null ? requestId() : null;
  // Whether a lost reply may be sent once more: answered from the latch,
  // by the command itself (a lock's HELD, a session's), or by a command
  // that changes nothing.
  const resendable = request !== null || kind.idempotent || !kind.writes;
  const waitMs = blockMs || null; // the bounded wait asked for, kept by a resend
  const started = performance.now();
  const sessionLink = kind.sessionLink;
  let link: Link | null = null;
  let keep = false;
  try {
    let planned: Planned | null = null;
    let lost = false;
    if (!kind.session && (blockMs === null || !ctx.waiters.has(kind.key))) {
      let tried: Sent | Planned | null = null;
      try {
        tried = await tryShared(ctx, kind, waitMs, request);
      } catch (error) {
        if (isReplyError(error) || !resendable || signal?.aborted) {
          throw error;
        }
        // The reply was lost (the connection failed or did not answer in
        // time): resent below, with the same request id or HELD.
        lost = true;
      }
      if (tried !== null && "reply" in tried) {
        const outcome = kind.outcome(tried.reply, null);
        if (outcome.acquired || signal?.aborted) {
          return await settle(ctx, kind, outcome, tried.short, null, request, signal);
        }
        blockMs = remaining(blockMs, performance.now() - started);
        if (blockMs === null) {
          return outcome; // a try, or a wait already over
        }
        // Refused, and it may wait: it waits on the server, on a
        // dedicated connection, as an acquisition of its own (a refusal
        // stores no latch, but its id is spent).
        request = kind.acquireLatch !== null ? requestId() : null;
      } else {
        planned = tried;
      }
    }
    link = sessionLink ?? (await links.checkout(kind.key));
    let sent: Sent;
    let touch: Args | null = null;
    if (lost) {
      ({ blockMs, touch } = resending(ctx, kind, blockMs, started, request, waitMs));
    }
    try {
      sent = await waiting(ctx, kind.key, blockMs, () => send(ctx, kind, link!, blockMs, waitMs, request, touch, signal, planned));
    } catch (error) {
      if (link === sessionLink || lost) {
        throw error;
      }
      if (isMoved(error)) {
        // The slot moved to another master (a reshard): once more, there.
        links.checkin(link);
        link = await links.checkoutOn(await links.redirected(error, kind.key));
      } else if (!isReplyError(error) && !signal?.aborted && resendable) {
        // The reply was lost (the connection failed or timed out): the
        // server may or may not have granted it. Once more, on a new
        // connection, with the same request id or HELD and what is left of
        // the wait: a grant is answered again instead of counted twice (a
        // wait that writes nothing is simply asked again). A session's
        // hold is bound to its connection and was freed with it: a
        // session's acquisition carries neither, the resend is a new
        // acquisition.
        ({ blockMs, touch } = resending(ctx, kind, blockMs, started, request, waitMs));
        links.checkin(link);
        link = await links.checkout(kind.key);
      } else {
        throw error;
      }
      const resent = link;
      sent = await waiting(ctx, kind.key, blockMs, () => send(ctx, kind, resent, blockMs, waitMs, request, touch, signal, null));
    }
    const outcome = kind.outcome(sent.reply, blockMs);
    keep = outcome.acquired && kind.session && !signal?.aborted && sent.short === null;
    // A lost try's bytes, written before its connection was given up, may
    // still reach the server after the resend: a semaphore's latch is left
    // to expire (not deleted by the release), answering that late send
    // instead of granting what nobody knows of.
    return await settle(ctx, kind, outcome, sent.short, link, lost ? null : request, signal);
  } catch (error) {
    if (isReplyError(error) && (error as Error).message.startsWith("NON_REENTRANT")) {
      throw new NotReentrant(`${kind.key}: ${(error as Error).message}`, { cause: error });
    }
    if (isReplyError(error) && (error as Error).message.startsWith("NOREPLICAS")) {
      // The master's min-replicas-to-write refused the write: nothing was written.
      throw new NotSynced(`${kind.key}: ${(error as Error).message}`, { cause: error });
    }
    if (!isReplyError(error)) {
      await leaveLine(ctx, kind, waitMs);
    }
    if (signal?.aborted && error !== signal.reason && !isReplyError(error)) {
      // The wait was ended by closing its connection: had the server
      // served it at that moment, the reply is lost but the grant is not.
      await kind.recover(link, request);
      throw signal.reason;
    }
    throw error;
  } finally {
    if (link !== null && link !== sessionLink && !keep) {
      links.checkin(link);
    }
  }
}

/** Runs `send`, counted among the key's waiters of this client object while it may wait on the server. */
async function waiting<T>(ctx: ClientContext, key: string, blockMs: number | null, send: () => Promise<T>): Promise<T> {
  if (blockMs === null) {
    return send();
  }
  const { waiters } = ctx;
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
 * and writes besides: a semaphore's replay from its latch writes nothing
 * on its connection, so a `WAIT` after it would not cover the grant the
 * first send wrote: one write after it (the latch's expiry set again;
 * nothing when refused), in the same round trip. A lock's replay (`HELD`)
 * replicates a write of its own.
 */
function resending(ctx: ClientContext, kind: Acquisition, blockMs: number | null, started: number, request: string | null, waitMs: number | null): { blockMs: number | null; touch: Args | null } {
  const latch = ctx.sync.enabled && kind.writes && kind.acquireLatch !== null && request !== null ? kind.acquireLatch(request) : null;
  return {
    blockMs: remaining(blockMs, performance.now() - started),
    touch: latch === null ? null : ["PEXPIRE", latch, LATCH_TTL_MS + (waitMs ?? 0)],
  };
}

/**
 * What an acquisition's reply means for the caller: aborted meanwhile,
 * a grant given back (and the signal's reason or `NotSynced` thrown);
 * else a grant recorded (`link`: the dedicated connection it came on,
 * kept by a session; null: the own one).
 */
async function settle(ctx: ClientContext, kind: Acquisition, outcome: Outcome, short: string | null, link: Link | null, request: string | null, signal: AbortSignal | undefined): Promise<Outcome> {
  if (signal?.aborted) {
    if (outcome.acquired) {
      // Served at the moment it was cancelled: given back.
      await giveBack(ctx, kind, link);
    }
    throw signal.reason;
  }
  if (outcome.acquired) {
    if (short !== null) {
      await giveBack(ctx, kind, link);
      throw new NotSynced(`${kind.key}: ${short} within ${ctx.sync.timeout} ms; the grant was given back`);
    }
    kind.record(outcome, link, request);
  }
  return outcome;
}

/** The checks an acquisition of `kind` on `node` sends, or null when the master's INFO must be asked first. */
function plan(ctx: ClientContext, kind: Acquisition, node: string): Checks | null {
  return kind.writes ? ctx.masters.plan(node, ctx.sync) : NO_CHECKS;
}

/**
 * An acquisition's first attempt, which does not wait (no `BLOCK`), on
 * the client object's own connection to the key's master (`Links.shared`: no
 * connection of its own to check out, and written with whatever else goes
 * there in the same tick), with the `INFO` the replica check asks now and
 * then. Returns the replica check's plan instead, sending nothing, when
 * it waits on this master (`WAIT`, `WAITAOF`: they would hold up the
 * shared connection, and `WAIT` counts the writes of its own
 * connection): the acquisition goes on a dedicated connection. A `MOVED`
 * reply (a reshard) re-reads the slot map and leaves the acquisition to
 * the dedicated connection too (nothing ran). Rejects with the
 * acquisition's error reply, or ioredis's error (the reply lost: it may
 * have run).
 */
async function tryShared(ctx: ClientContext, kind: Acquisition, waitMs: number | null, request: string | null): Promise<Sent | Planned | null> {
  const { links, masters, sync, replyMargin } = ctx;
  const base = links.single ?? (await links.nodeFor(kind.key));
  const node = links.nodeOf(base);
  let checks = plan(ctx, kind, node);
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
  const args = kind.command(null, request, waitMs);
  const replies = await links.shared(base, [args, ...commandsOf(checks)], replyMargin);
  const first = replies[0];
  if (first === undefined || first.error !== null) {
    if (links.cluster && isMoved(first?.error)) {
      await links.redirected(first!.error, kind.key);
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
async function send(ctx: ClientContext, kind: Acquisition, link: Link, blockMs: number | null, waitMs: number | null, request: string | null, touch: Args | null, signal: AbortSignal | undefined, planned: Planned | null): Promise<Sent> {
  const { links, masters, sync } = ctx;
  let checks = planned !== null && planned.node === link.node ? planned.checks : plan(ctx, kind, link.node);
  if (checks === null) {
    const asked = performance.now();
    masters.learn(link.node, await links.call(link, INFO, ctx.replyMargin), asked);
    checks = masters.plan(link.node, sync) ?? NO_CHECKS;
  }
  const args = kind.command(blockMs, request, waitMs);
  const commands: Args[] = [args, ...(touch === null ? [] : [touch]), ...commandsOf(checks)];
  const timeout = blockMs === 0 ? null : (blockMs ?? 0) + extraMs(checks) + ctx.replyMargin;
  const replies = await links.pipeline(link, commands, timeout, signal);
  const first = replies[0];
  if (first === undefined || first.error !== null) {
    throw first?.error ?? new Error("no reply to the acquisition");
  }
  const short = masters.read(checks, replies.slice(touch === null ? 1 : 2), link.node);
  return { reply: first.reply, short };
}

/**
 * Gives back the grant an acquisition just made on `link` (null: it came
 * on the own connection, which gives it back); when `link`
 * failed (a replica sync's reply lost), on the own connection:
 * a grant that is not a session's outlives `link` and must not be left.
 */
async function giveBack(ctx: ClientContext, kind: Acquisition, link: Link | null): Promise<void> {
  const args = kind.undo();
  if (args === null) {
    return;
  }
  if (link === null) {
    await ctx.links.command(kind.key, args);
    return;
  }
  try {
    await ctx.links.call(link, args, ctx.replyMargin);
  } catch (error) {
    if (isReplyError(error) || kind.session) {
      throw error;
    }
    await ctx.links.command(kind.key, args);
  }
}

/**
 * Takes the caller out of a fair lock's line a failed wait may have left
 * it in: the server does so itself when the waiting connection closes,
 * but a connection it still believes open would keep the owner in the
 * line, holding up everyone behind. Best effort.
 */
async function leaveLine(ctx: ClientContext, kind: Acquisition, waitMs: number | null): Promise<void> {
  const args = kind.abandon(waitMs);
  if (args !== null) {
    await ctx.links.command(kind.key, args).catch(() => undefined);
  }
}

/**
 * A write that carries no request id (a count-down, a semaphore's
 * try-set, add or drain), sent exactly once: on a dedicated connection of
 * the pool, which resends nothing, its reply
 * awaited `replyMargin`. Resolves its reply; rejects with its error reply,
 * or with the connection's error when the reply was lost (it may have run).
 */
export async function once(ctx: ClientContext, key: string, args: Args): Promise<unknown> {
  const [reply] = await ctx.links.commands(key, [args], ctx.replyMargin);
  if (reply === undefined || reply.error !== null) {
    throw reply?.error ?? new Error(`no reply to ${args[0]}`);
  }
  return reply.reply;
}

/**
 * What an abort of a grant without a lease of its own (a semaphore's
 * permits) needs after the abort closed `link` (null: the try on the
 * own connection): once the server dropped that connection
 * nothing more can be granted to it; the acquisition's `latch` then says
 * whether it was (a grant stores it, a refusal nothing), and `giveBack`
 * runs when it was. Best effort: with the server unreachable, the abort's
 * reason stays the error to see.
 */
export async function recoverGrant(ctx: ClientContext, key: string, link: Link | null, latch: string, giveBack: () => Promise<unknown>): Promise<void> {
  try {
    if (link !== null) {
      await ctx.links.gone(link, ctx.replyMargin);
    }
    if (int(await ctx.links.command(key, ["EXISTS", latch])) === 1) {
      await giveBack();
    }
  } catch {
    // The server is unreachable: the abort's reason is the error to see.
  }
}

/** A lock's release's reply, and whether it may be a resend's (see `releaseHeld`). */
export interface Released {
  readonly reply: unknown;
  /** The reply is a resend's: the first send's reply was lost, and this resent it. */
  readonly resent: boolean;
}

/**
 * A lock's release, one command that is not a session's, on the client
 * object's own connection (`Links.shared`, written with whatever else goes
 * there in the same tick; it never sends a command twice, so a reply that
 * comes there is the first send's). `resendable`: it carries `HELD` (a
 * multi-lock's and a release of a handle holding nothing do not): its lost
 * reply (the connection failed, or no reply within the margin) is sent
 * once more, on a dedicated connection of the pool (`Links.commands`: it
 * resends nothing behind our back either); otherwise the error is raised.
 * A `MOVED` reply (a reshard: nothing ran) sends it there too, to the
 * slot's new master, as a first send. Resolves with its reply and whether
 * that is a resend's: the caller never reads a resend's nil as "released".
 */
export async function releaseHeld(ctx: ClientContext, key: string, args: Args, resendable: boolean): Promise<Released> {
  const { links } = ctx;
  let reply: Settled | undefined;
  let resent = false;
  try {
    const [sent] = await links.shared(links.single ?? (await links.nodeFor(key)), [args], ctx.replyMargin);
    if (!(links.cluster && isMoved(sent?.error))) {
      reply = sent;
    }
  } catch (error) {
    if (!resendable) {
      throw error;
    }
    resent = true;
  }
  if (reply === undefined) {
    [reply] = await links.commands(key, [args], ctx.replyMargin);
  }
  if (reply === undefined || reply.error !== null) {
    throw reply?.error ?? new Error("no reply to the release");
  }
  return { reply: reply.reply, resent };
}

/** How many acquisitions' latches a handle keeps for its next release's `DEL`. */
const MAX_KEPT = 64;

/**
 * The latches a semaphore's acquisitions and releases left on the server,
 * deleted by the `DEL` pipelined with its next release (docs/clients.md,
 * "Request ids on acquisitions").
 */
export class Latches {
  /** The acquisitions' latches since the last release (`keep`). */
  acquired: string[] = [];
  // The unlock latches of the releases whose replies came: deleted by the
  // next release's DEL, never by their own (a release's own latch must
  // outlive its reply, for its resend to be answered from it); they
  // outlive the handle's holds, or expire on their own.
  released: string[] = [];

  /**
   * Keeps an acquisition's latch for the next release's `DEL`: the last
   * `MAX_KEPT` only, the older ones left to expire (a semaphore object that
   * only acquires, while others release, would otherwise keep them all).
   */
  keep(latch: string): void {
    this.acquired.push(latch);
    if (this.acquired.length > MAX_KEPT) {
      this.acquired.shift();
    }
  }
}

/**
 * A semaphore's release, on the client object's own connection
 * (`Links.shared`, written with whatever else goes there in the same
 * tick). `latch`: the server's copy of its reply under its request id
 * (null: it sends none): sent once more with the same id, it gets the
 * first one's reply instead of releasing twice. One `DEL`, pipelined with
 * the release (one round trip), deletes `latches`: the acquisitions' since
 * the last release, and those of the handle's earlier releases. The
 * release's own latch is never in it: it is added to `latches` once its
 * reply came, for the handle's next release's `DEL` (or to expire), so
 * that a resend is answered from it with what the first send did instead
 * of finding nothing and guessing; a concurrent release of the same handle
 * cannot delete it while a resend may still need it. The resend: by this
 * when the reply was lost (the connection failed, no reply within the
 * margin), on a dedicated connection of the pool (`Links.commands`: it resends nothing behind our
 * back). A `MOVED` reply (a reshard) sends it there too, to the slot's new
 * master. The `DEL`'s reply is not looked at: latches it missed expire on
 * their own. Resolves with the release's reply.
 */
export async function release(ctx: ClientContext, key: string, args: Args, latch: string | null, latches: Latches): Promise<unknown> {
  const { links } = ctx;
  const earlier = [...latches.released, ...latches.acquired];
  latches.acquired = [];
  latches.released = [];
  const commands: Args[] = earlier.length > 0 ? [args, ["DEL", ...earlier]] : [args];
  let replies: Settled[] | null = null;
  let kept = latch;
  try {
    const sent = await links.shared(links.single ?? (await links.nodeFor(key)), commands, ctx.replyMargin);
    const moved = links.cluster && isMoved(sent[0]?.error);
    if (!moved) {
      replies = sent;
    }
  } catch (error) {
    if (latch === null) {
      throw error;
    }
    // Its bytes, written before the connection was given up, may still
    // reach the server after the resend: its latch is never deleted, but
    // expires, so that a late send is answered from it instead of
    // releasing what was taken since.
    kept = null;
    replies = await links.commands(key, commands, ctx.replyMargin);
  }
  if (replies === null) {
    // Redirected (nothing ran): to the slot's new master.
    replies = await links.commands(key, commands, ctx.replyMargin);
  }
  const first = replies[0];
  if (first === undefined || first.error !== null) {
    throw first?.error ?? new Error("no reply to the release");
  }
  if (kept !== null) {
    latches.released.push(kept);
  }
  return first.reply;
}
