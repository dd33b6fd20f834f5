/** What each lock kind sends and how its replies read (no server): the wire format of the contract. */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { parseInfo, requestId, Target } from "../src/commands";
import { LockError } from "../src/errors";
import { blockOf, remaining, syncOf, toMs } from "../src/options";

describe("commands", () => {
  it("plain, fenced, non-reentrant acquisitions; waits as BLOCK", () => {
    const plain = new Target([["LOCK", "a"]], false);
    assert.deepEqual(plain.acquire("u:1", 30000, 0, false), ["LOCK.ACQUIRE", "a", "u:1", 30000, "BLOCK", 0]);
    assert.deepEqual(plain.acquire("u:1", 5, null, true), ["LOCK.ACQUIRE", "a", "u:1", 5, "SESSION"]);
    const fenced = new Target([["LOCK", "a"]], false, true, false);
    assert.deepEqual(fenced.acquire("u:1", 5, 100, false), ["LOCK.ACQUIRE", "a", "u:1", 5, "BLOCK", 100, "FENCED", "NOREENTRY"]);
    assert.deepEqual(fenced.outcome([-1, 7]), { acquired: true, pttl: null, token: 7 });
    assert.deepEqual(fenced.outcome([900, -1]), { acquired: false, pttl: 900, token: null });
    assert.deepEqual(plain.outcome(null), { acquired: true, pttl: null, token: null });
    assert.deepEqual(plain.outcome(1234), { acquired: false, pttl: 1234, token: null });
    assert.equal(blockOf(undefined), 0);
    assert.equal(blockOf(null), 0);
    assert.equal(blockOf(Infinity), 0);
    assert.equal(blockOf(0), null);
    assert.equal(blockOf(1.2), 2);
    assert.throws(() => blockOf(-1), RangeError);
    assert.throws(() => toMs(0, "lease"), RangeError);
    assert.throws(() => toMs(4e11, "lease"), RangeError);
    // HELD (the holds before) on single locks' acquisitions, 0 included; a resend waits what is left.
    assert.deepEqual(fenced.acquire("u:1", 5, 100, false, 0), ["LOCK.ACQUIRE", "a", "u:1", 5, "BLOCK", 100, "HELD", 0, "FENCED", "NOREENTRY"]);
    assert.deepEqual(new Target([["READ", "r"]], false).acquire("u:1", 5, null, false, 2), ["RWLOCK.READ", "r", "u:1", 5, "HELD", 2]);
    assert.deepEqual(new Target([["WRITE", "w"]], false).acquire("u:1", 5, null, false, 1), ["RWLOCK.WRITE", "w", "u:1", 5, "HELD", 1]);
    assert.deepEqual(plain.acquire("u:1", 5, 40, false, 1, 100), ["LOCK.ACQUIRE", "a", "u:1", 5, "BLOCK", 40, "HELD", 1]);
    // A multi-lock has none (LOCK.ACQUIREALL takes no HELD).
    assert.deepEqual(new Target([["LOCK", "a"]], true).acquire("u:1", 5, null, false, 0), ["LOCK.ACQUIREALL", "u:1", 5, "HOLDS", 1, "LOCK", "a"]);
    assert.equal(remaining(1000, 300.5), 699);
    assert.equal(remaining(1000, 2000), null);
    assert.equal(remaining(0, 1e9), 0);
    assert.equal(remaining(null, 5), null);
  });

  it("fair locks: FAIRLOCK.ACQUIRE (a try is NOQUEUE), CANCEL, UNLOCK, and LOCK.RENEW", () => {
    const fair = new Target([["LOCK", "f"]], false, false, true, true);
    assert.deepEqual(fair.acquire("u:1", 5, null, false), ["FAIRLOCK.ACQUIRE", "f", "u:1", 5, "NOQUEUE"]);
    assert.deepEqual(fair.acquire("u:1", 5, 0, false, 0), ["FAIRLOCK.ACQUIRE", "f", "u:1", 5, "BLOCK", 0, "HELD", 0]);
    // A bounded wait is its own WAIT (Redisson's tryLock(w)); otherwise fairWait's, or none.
    const waited = new Target([["LOCK", "f"]], false, false, false, true, 5000);
    assert.deepEqual(waited.acquire("u:1", 5, 250, false), ["FAIRLOCK.ACQUIRE", "f", "u:1", 5, "WAIT", 250, "BLOCK", 250, "NOREENTRY"]);
    assert.deepEqual(waited.acquire("u:1", 5, 0, false), ["FAIRLOCK.ACQUIRE", "f", "u:1", 5, "WAIT", 5000, "BLOCK", 0, "NOREENTRY"]);
    assert.deepEqual(waited.acquire("u:1", 5, null, false, 1), ["FAIRLOCK.ACQUIRE", "f", "u:1", 5, "WAIT", 5000, "NOQUEUE", "NOREENTRY", "HELD", 1]);
    assert.deepEqual(fair.acquire("u:1", 5, 100, false, 3, 250), ["FAIRLOCK.ACQUIRE", "f", "u:1", 5, "WAIT", 250, "BLOCK", 100, "HELD", 3]);
    assert.deepEqual(waited.abandon("u:1"), ["FAIRLOCK.CANCEL", "f", "u:1", "WAIT", 5000]);
    assert.deepEqual(waited.abandon("u:1", 250), ["FAIRLOCK.CANCEL", "f", "u:1", "WAIT", 250]);
    assert.equal(new Target([["LOCK", "a"]], false).abandon("u:1"), null);
    assert.deepEqual(fair.release("u:1", 30000, 1), ["FAIRLOCK.UNLOCK", "f", "u:1", "LEASE", 30000]);
    assert.deepEqual(fair.renew("u:1", 9), ["LOCK.RENEW", "f", "u:1", 9]);
    assert.deepEqual(fair.outcome(1, null), { acquired: false, pttl: null, token: null });
    assert.deepEqual(fair.outcome(900, 100), { acquired: false, pttl: 900, token: null });
    assert.deepEqual(fair.outcome(null, null), { acquired: true, pttl: null, token: null });
    assert.throws(() => new Target([["READ", "f"]], false, false, true, true), LockError);
    assert.throws(() => new Target([["LOCK", "f"]], false, true, true, true), LockError);
  });

  it("releases carry LEASE and, for single locks, HELD (the holds before; a last release's 1 never, the server never replays it)", () => {
    const plain = new Target([["LOCK", "a"]], false);
    assert.deepEqual(plain.release("u:1", 30000, 1), ["LOCK.UNLOCK", "a", "u:1", "LEASE", 30000]);
    assert.deepEqual(plain.release("u:1", 30000, 3), ["LOCK.UNLOCK", "a", "u:1", "LEASE", 30000, "HELD", 3]);
    const read = new Target([["READ", "r"]], false);
    assert.deepEqual(read.release("u:1", 9, 2), ["RWLOCK.UNLOCK", "r", "u:1", "READ", "LEASE", 9, "HELD", 2]);
    assert.deepEqual(new Target([["WRITE", "w"]], false).release("u:1", 9, 1), ["RWLOCK.UNLOCK", "w", "u:1", "WRITE", "LEASE", 9]);
    assert.deepEqual(read.release("u:1", 9, null), ["RWLOCK.UNLOCK", "r", "u:1", "READ", "LEASE", 9]);
    assert.equal(plain.released(null), null);
    assert.equal(plain.released(0), false);
    assert.equal(plain.released(1), true);
    assert.match(requestId(), /^[0-9a-f]{32}$/);
    assert.notEqual(requestId(), requestId());
  });

  it("multi-locks: ACQUIREALL, UNLOCKALL (no HELD), RENEWALL", () => {
    const multi = new Target([["LOCK", "a"], ["WRITE", "b"]], true);
    assert.equal(multi.key, "a");
    assert.deepEqual(multi.acquire("u:1", 5, 0, true), ["LOCK.ACQUIREALL", "u:1", 5, "BLOCK", 0, "SESSION", "HOLDS", 2, "LOCK", "a", "WRITE", "b"]);
    assert.deepEqual(multi.release("u:1", 5, 1), ["LOCK.UNLOCKALL", "u:1", "HOLDS", 2, "LOCK", "a", "WRITE", "b"]);
    assert.deepEqual(multi.renew("u:1", 5), ["LOCK.RENEWALL", "u:1", 5, "HOLDS", 2, "LOCK", "a", "WRITE", "b"]);
    assert.equal(multi.released([1, 1]), true);
    assert.equal(multi.released([1, null]), null);
    assert.equal(multi.renewed([1, 1]), true);
    assert.equal(multi.renewed([1, 0]), false);
    assert.deepEqual(new Target([["WRITE", "w"]], false).renew("u:1", 5), ["RWLOCK.RENEW", "w", "u:1", 5]);
  });

  it("INFO fields and the sync policy", () => {
    const info = parseInfo("# Replication\r\nrole:master\r\nconnected_slaves:2\r\n\r\n# Persistence\r\naof_enabled:1\r\n");
    assert.equal(info.get("connected_slaves"), "2");
    assert.equal(info.get("aof_enabled"), "1");
    assert.deepEqual(syncOf(undefined), { enabled: true, timeout: 1000, replicas: "auto", aof: "auto" });
    // The booleans of before: on is "auto", off is "off".
    assert.deepEqual(syncOf({ aof: false }), { enabled: true, timeout: 1000, replicas: "auto", aof: "off" });
    assert.deepEqual(syncOf({ aof: true, replicas: 2 }), { enabled: true, timeout: 1000, replicas: 2, aof: "auto" });
  });
});
