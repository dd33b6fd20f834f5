/** `ReadWriteLock`: Redisson's `RReadWriteLock` on the `RWLOCK.*` commands. */

import { Target } from "./commands";
import type { ClientContext } from "./driver";
import { Lock, type HandleOptions } from "./lock";

/**
 * A read-write lock: many readers, or one writer. Its two sides are lock
 * handles with one owner, so the writer may also read (downgrade: take
 * the read side, then release the write side); a reader is never upgraded.
 */
export class ReadWriteLock {
  private readonly read: Lock;
  private readonly write: Lock;

  /** Made by `Client.readWriteLock`; `fenced`: write holds take fencing tokens. */
  constructor(ctx: ClientContext, readonly name: string, owner: string, fenced: boolean, options: HandleOptions) {
    this.read = new Lock(ctx, new Target([["READ", name]], false), owner, options);
    this.write = new Lock(ctx, new Target([["WRITE", name]], false, fenced), owner, options);
  }

  /** The owner both sides send. */
  get owner(): string {
    return this.read.owner;
  }

  /** The read side (`RWLOCK.READ`): shared with other readers. */
  readLock(): Lock {
    return this.read;
  }

  /** The write side (`RWLOCK.WRITE`): exclusive. */
  writeLock(): Lock {
    return this.write;
  }
}
