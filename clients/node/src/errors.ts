/**
 * The error kinds every rwlock client shares (the same names in Python, Rust,
 * Java, Go and Node.js). Errors of ioredis itself (connection, timeout,
 * `ReplyError`) pass through unchanged.
 */

/** The base class of this package's errors. */
export class LockError extends Error {
  /** Creates the error; `name` is the subclass's name, for logs. */
  constructor(message: string, options?: ErrorOptions) {
    super(message, options);
    this.name = new.target.name;
  }
}

/**
 * The wait ran out before the lock could be taken (`hold()`, `withLock()`;
 * `acquire()` resolves `false` instead).
 */
export class NotAcquired extends LockError {
  /** What the holds in the way had left of their lease, in ms (null: unknown). */
  readonly pttl: number | null;

  /** `name`: the lock; `pttl`: the lease left to the holds in the way. */
  constructor(name: string, pttl: number | null) {
    super(`${name} was not acquired${pttl === null ? "" : `: held for ${pttl} ms more`}`);
    this.pttl = pttl;
  }
}

/**
 * A release (or a renewal) by an owner that holds nothing: never taken,
 * already released, or lost (the lease ran out, the lock was forced open,
 * the session's connection closed).
 */
export class NotHeld extends LockError {}

/**
 * The last hold's release lost its reply, and its resend found the owner
 * holding nothing: this release freed the lock, or the hold was gone
 * before it (lease run out, failover, key deleted). Which one cannot be
 * known, so this is not a `NotHeld`; the handle holds nothing either way.
 */
export class ReleaseUnknown extends LockError {}

/**
 * The holder of a non-reentrant lock asked for it again (the server's
 * `NON_REENTRANT_REACQUIRE` error); nothing changed.
 */
export class NotReentrant extends LockError {}

/**
 * The master's replicas did not all acknowledge an acquisition within the
 * sync timeout (`WAIT`/`WAITAOF`); the hold was released again.
 */
export class NotSynced extends LockError {}
