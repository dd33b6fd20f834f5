/** `Client`: the client object every lock handle comes from (one client UUID, one set of options). */

import { asyncDispose } from "./dispose";
import { LockError } from "./errors";
import { Target } from "./commands";
import { Links, type RedisClient } from "./link";
import type { ClientContext } from "./driver";
import { CountDownLatch } from "./latch";
import { Lock, type HandleOptions } from "./lock";
import { MultiLock, type MultiHold } from "./multi";
import { DEFAULT_WATCHDOG_TIMEOUT, REPLY_MARGIN, syncOf, toMs, type ReplicaSync } from "./options";
import { clientIdOf, Owners } from "./owner";
import { PermitExpirableSemaphore, type PermitsLostCallback } from "./permit";
import { ReadWriteLock } from "./rwlock";
import { Semaphore } from "./semaphore";
import { Masters } from "./sync";
import type { Watchdog } from "./watchdog";

/** A client object's options. */
export interface ClientOptions {
  /**
   * The client UUID of every owner (`<clientId>:<n>`); default a random UUID
   * v4. Never give it a Redisson instance's: their owners would collide.
   */
  clientId?: string;
  /** The lease (ms) of a hold taken without one, renewed every third of it: Redisson's `lockWatchdogTimeout`, 30000. */
  watchdogTimeout?: number;
  /** Replica acknowledgement after each acquisition: `{ enabled: true, timeout: 1000, replicas: "auto", aof: "auto" }` (`ReplicaSync`). */
  sync?: Partial<ReplicaSync>;
  /** Added to a wait (ms) for its reply to arrive before the dedicated connection is given up; 5000. */
  replyMargin?: number;
}

/** A lock handle's options. */
export interface LockOptions extends HandleOptions {
  /** `RFencedLock`: every acquisition takes the next fencing token (`hold.token`, `lock.token`). */
  fenced?: boolean;
  /** false: Redisson's non-reentrant lock (`NOREENTRY`): taking it again rejects with `NotReentrant`. */
  reentrant?: boolean;
}

/** A fair lock's options (no `session`: the module's fair lock has no session holds). */
export interface FairLockOptions extends Omit<HandleOptions, "session"> {
  /** false: Redisson's non-reentrant fair lock (`NOREENTRY`): taking it again rejects with `NotReentrant`. */
  reentrant?: boolean;
  /**
   * The line's wait time (ms; `WAIT`, Redisson's `fairLockWaitTimeout`) of
   * the acquisitions without a bounded wait (without limit, a try): how long
   * a waiter may be away before Redisson's clients count it gone, and how
   * far the waiters' deadlines move when one ahead acquires or leaves. A
   * bounded wait sends itself, as Redisson's `tryLock(wait)` does. Give what
   * the Java services sharing the line use. Default: the server's
   * `rwlock.fair-wait` (300000, Redisson's default).
   */
  fairWait?: number;
}

/** A read-write lock's options. */
export interface ReadWriteLockOptions extends HandleOptions {
  /** The write side takes fencing tokens. */
  fenced?: boolean;
}

/**
 * The client object: lock handles on one ioredis client (a `Redis` or a
 * `Cluster`), with one client UUID. Each handle it makes is an owner of its
 * own, `<clientId>:<n>`.
 *
 * ```ts
 * const client = new Client(new Redis(6399));
 * await client.lock("invoice:42").withLock(async () => { ... }, { wait: 5_000 });
 * ```
 *
 * Its commands go on connections of its own (`duplicate()`s of the ioredis
 * client's, opened as needed), never on the application's: ioredis
 * resends there what was not answered once it reconnects, which could
 * run a release or an acquisition given up for lost again, much later.
 * `close()` (or `await using`) closes them (ending their session holds)
 * and stops its watchdogs; the ioredis client stays the application's.
 */
export class Client implements AsyncDisposable {
  /** The client UUID of this object's owners. */
  readonly clientId: string;
  /** The application's ioredis client. */
  readonly client: RedisClient;
  private readonly ctx: ClientContext;
  private readonly owners: Owners;

  /** `client`: an ioredis `Redis` (one server) or `Cluster`. */
  constructor(client: RedisClient, options: ClientOptions = {}) {
    if (client === null || typeof client !== "object" || typeof (client as { call?: unknown }).call !== "function") {
      throw new TypeError("Client needs an ioredis Redis or Cluster client");
    }
    const configured = (client as { options?: { keyPrefix?: string; redisOptions?: { keyPrefix?: string } } }).options;
    if (configured?.keyPrefix || configured?.redisOptions?.keyPrefix) {
      // ioredis prefixes the keys of the commands it knows (DEL of a latch)
      // but not the module's (it does not know where their keys are): the
      // lock and its latch would part.
      throw new TypeError("Client cannot use an ioredis client with keyPrefix: put the prefix in the lock names");
    }
    this.client = client;
    this.clientId = clientIdOf(options.clientId);
    this.owners = new Owners(this.clientId);
    const replyMargin = toMs(options.replyMargin ?? REPLY_MARGIN, "replyMargin");
    this.ctx = {
      links: new Links(client, replyMargin),
      watchdogTimeout: toMs(options.watchdogTimeout ?? DEFAULT_WATCHDOG_TIMEOUT, "watchdogTimeout", 3),
      sync: syncOf(options.sync),
      masters: new Masters(),
      replyMargin,
      dogs: new Set<Watchdog>(),
      waiters: new Map<string, number>(),
    };
  }

  /** The lease of a hold taken without one (ms). */
  get watchdogTimeout(): number {
    return this.ctx.watchdogTimeout;
  }

  /** The plain lock `name` (`LOCK.*`): Redisson's `RLock`, `RFencedLock` with `fenced`, non-reentrant with `reentrant: false`. */
  lock(name: string, options: LockOptions = {}): Lock {
    const target = new Target([["LOCK", name]], false, options.fenced === true, options.reentrant !== false);
    return new Lock(this.ctx, target, this.owners.create(), options);
  }

  /**
   * The fair lock `name` (`FAIRLOCK.*`): Redisson's `RFairLock`, its
   * non-reentrant fair lock with `reentrant: false`. Waiters are served in
   * arrival order, in one line with Redisson's own waiters: a wait joins the
   * line and waits in it on the server (`BLOCK`), which takes it out of the
   * line when the wait runs out or its signal aborts; `wait: 0` is
   * Redisson's `tryLock()`, one try that never joins the line. Leases, the
   * watchdog (`LOCK.RENEW`) and releases are the plain lock's. A release of
   * a hold whose lease ran out (the lock no longer exists) rejects with
   * `NotHeld`, as the plain lock's (`FAIRLOCK.UNLOCK` replies nil there,
   * where Redisson's script replies 1), and so does one the watchdog found
   * lost.
   */
  fairLock(name: string, options: FairLockOptions = {}): Lock {
    if ((options as HandleOptions).session === true) {
      throw new LockError("a fair lock cannot take session holds");
    }
    const fairWait = options.fairWait === undefined ? null : toMs(options.fairWait, "fairWait");
    const target = new Target([["LOCK", name]], false, false, options.reentrant !== false, true, fairWait);
    return new Lock(this.ctx, target, this.owners.create(), options);
  }

  /** `lock(name, { fenced: true })`: Redisson's `RFencedLock`. */
  fencedLock(name: string, options: Omit<LockOptions, "fenced"> = {}): Lock {
    return this.lock(name, { ...options, fenced: true });
  }

  /** The read-write lock `name` (`RWLOCK.*`): Redisson's `RReadWriteLock`. */
  readWriteLock(name: string, options: ReadWriteLockOptions = {}): ReadWriteLock {
    return new ReadWriteLock(this.ctx, name, this.owners.create(), options.fenced === true, options);
  }

  /** A multi-lock over `holds` (lock handles or `[kind, name]`, kind LOCK, READ or WRITE). */
  multiLock(holds: readonly MultiHold[], options: HandleOptions = {}): MultiLock {
    return new MultiLock(this.ctx, holds, this.owners.create(), options);
  }

  /**
   * The semaphore `name` (`SEMAPHORE.*`): Redisson's `RSemaphore`. Its
   * permits have no owner: every `Semaphore` object of any client object
   * (or Redisson instance) on that name shares them.
   */
  semaphore(name: string): Semaphore {
    return new Semaphore(this.ctx, name);
  }

  /**
   * The permit-expirable semaphore `name` (`PERMIT.*`): Redisson's
   * `RPermitExpirableSemaphore`. Its permits are ids, released by whoever
   * has them; `onLost` is called (besides its `lost` event) when the
   * watchdog finds permits gone.
   */
  permitExpirableSemaphore(name: string, options: { onLost?: PermitsLostCallback } = {}): PermitExpirableSemaphore {
    return new PermitExpirableSemaphore(this.ctx, name, options.onLost);
  }

  /** The count-down latch `name` (`LATCH.*`): Redisson's `RCountDownLatch`. */
  countDownLatch(name: string): CountDownLatch {
    return new CountDownLatch(this.ctx, name);
  }

  /** Stops the watchdogs and closes the client object's own and dedicated connections (session holds end with them). */
  async close(): Promise<void> {
    for (const dog of this.ctx.dogs) {
      dog.stop();
    }
    this.ctx.dogs.clear();
    this.ctx.links.close();
  }

  /** `await using locks = new Client(redis)`: `close()`. */
  [asyncDispose](): Promise<void> {
    return this.close();
  }
}
