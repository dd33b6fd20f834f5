/**
 * Owners in Redisson's format, `<client UUID>:<id>`. Redisson's id is a
 * thread's; JavaScript has no thread identity to borrow, so here the id is
 * one per lock handle: each lock object a client object makes is an owner
 * of its own (re-entry is per lock handle), and a read-write lock's two
 * sides share one owner, so its writer may also read (downgrade).
 */

import { randomUUID } from "node:crypto";

const UUID = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/;

/** The client UUID: the one given (checked), or a fresh random UUID v4. */
export function clientIdOf(given: string | undefined): string {
  if (given === undefined) {
    return randomUUID();
  }
  if (!UUID.test(given)) {
    throw new TypeError(`clientId must be a lowercase UUID like ${randomUUID()}, not ${JSON.stringify(given)}`);
  }
  return given;
}

/** Hands out the owners of one client object: `<uuid>:1`, `<uuid>:2`, … */
export class Owners {
  private next = 1;

  /** `clientId`: the client object's UUID. */
  constructor(readonly clientId: string) {}

  /** A new owner, never handed out before by this client object. */
  create(): string {
    return `${this.clientId}:${this.next++}`;
  }
}
