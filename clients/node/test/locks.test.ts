/** Every lock kind through the public API, against one real server. */

import { after, before, beforeEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { Redis } from "ioredis";
import { Client, NotAcquired, NotHeld, NotReentrant, LockError } from "../src/index";
import { Server } from "./support";

describe("locks", () => {
  let server: Server;
  let redis: Redis;
  let locks: Client;

  before(async () => {
    server = await Server.start();
    redis = server.client();
  });
  beforeEach(async () => {
    await redis.flushall();
    await locks?.close();
    locks = new Client(redis);
  });
  after(async () => {
    await locks?.close();
    await server.stop();
  });

  it("owners are <client UUID>:<n>, one per handle; clientId is settable and checked", () => {
    const a = locks.lock("x");
    const b = locks.lock("x");
    assert.match(a.owner, /^[0-9a-f-]{36}:1$/);
    assert.equal(b.owner, `${locks.clientId}:2`);
    const fixed = new Client(redis, { clientId: "0b6e7c9e-3f4a-4b1c-9d2e-8f7a6b5c4d3e" });
    assert.equal(fixed.lock("x").owner, "0b6e7c9e-3f4a-4b1c-9d2e-8f7a6b5c4d3e:1");
    assert.throws(() => new Client(redis, { clientId: "not-a-uuid" }), TypeError);
    assert.notEqual(new Client(redis).clientId, locks.clientId);
  });

  it("two handles are two owners: the second is refused with the holder's pttl", async () => {
    const a = locks.lock("two");
    const b = locks.lock("two");
    const acquired = performance.now();
    assert.equal(await a.acquire({ wait: 0, lease: 10_000 }), true);
    assert.equal(await b.acquire({ wait: 0, lease: 10_000 }), false);
    await assert.rejects(b.hold({ wait: 0 }), (e: unknown) => {
      assert.ok(e instanceof NotAcquired && e instanceof LockError && e instanceof Error);
      // The holder's 10 s lease less the time gone by since (a loaded machine's seconds included).
      const least = 10_000 - (performance.now() - acquired) - 20;
      assert.ok(e.pttl !== null && e.pttl >= least && e.pttl <= 10_000, `${e.pttl} < ${least}`);
      return true;
    });
    await a.release();
    await assert.rejects(a.release(), NotHeld);
  });

  it("await using releases at the block's end, withLock after fn, even when fn throws", async () => {
    const lock = locks.fencedLock("using");
    {
      await using hold = await lock.hold({ wait: 0 });
      assert.ok(hold.token !== null && hold.token >= 1);
      assert.equal(lock.token, hold.token);
      assert.equal(await redis.exists("using"), 1);
    }
    assert.equal(await redis.exists("using"), 0);
    assert.equal(lock.held, false);
    const value = await lock.withLock(async (hold) => {
      assert.equal(await redis.hget("using", lock.owner), "1");
      return hold.token;
    });
    assert.ok(typeof value === "number");
    await assert.rejects(lock.withLock(() => { throw new Error("boom"); }), /boom/);
    assert.equal(await redis.exists("using"), 0);
  });

  it("a fenced lock's tokens increase; a plain lock has none", async () => {
    const fenced = locks.fencedLock("fence");
    const first = await fenced.hold({ wait: 0, lease: 5_000 });
    await first.release();
    const second = await fenced.hold({ wait: 0, lease: 5_000 });
    assert.ok(second.token! > first.token!);
    assert.equal(await redis.get("redisson_lock_token:{fence}"), String(second.token));
    await second.release();
    const plain = await locks.lock("plain").hold({ wait: 0 });
    assert.equal(plain.token, null);
    await plain.release();
  });

  it("a non-reentrant lock: taking it again is NotReentrant, nothing changes", async () => {
    const lock = locks.lock("nr", { reentrant: false });
    await lock.acquire({ wait: 0, lease: 5_000 });
    await assert.rejects(lock.acquire({ wait: 0, lease: 5_000 }), NotReentrant);
    assert.equal(await redis.hget("nr", lock.owner), "1");
    await lock.release();
    assert.equal(await redis.exists("nr"), 0);
  });

  it("read-write: readers share, a writer excludes, the writer may read (downgrade)", async () => {
    const mine = locks.readWriteLock("rw");
    const theirs = locks.readWriteLock("rw");
    assert.equal(mine.readLock().owner, mine.writeLock().owner);
    assert.equal(await mine.writeLock().acquire({ wait: 0, lease: 10_000 }), true);
    assert.equal(await theirs.readLock().acquire({ wait: 0 }), false);
    assert.equal(await mine.readLock().acquire({ wait: 0, lease: 10_000 }), true);
    await mine.writeLock().release();
    assert.equal(await redis.hget("rw", "mode"), "read");
    assert.equal(await theirs.readLock().acquire({ wait: 0, lease: 10_000 }), true);
    assert.equal(await theirs.writeLock().acquire({ wait: 0 }), false, "a reader is never upgraded");
    await mine.readLock().release();
    await theirs.readLock().release();
    assert.equal(await redis.exists("rw"), 0);
  });

  it("a fenced read-write lock's writer takes tokens", async () => {
    const rw = locks.readWriteLock("frw", { fenced: true });
    const hold = await rw.writeLock().hold({ wait: 0, lease: 5_000 });
    assert.ok(hold.token !== null && hold.token >= 1);
    await hold.release();
  });

  it("multi-lock: all or none, from handles and pairs; released as one", async () => {
    const write = locks.readWriteLock("m2").writeLock();
    const multi = locks.multiLock([locks.lock("m1"), write, ["read", "m3"]]);
    assert.deepEqual(multi.holds, [["LOCK", "m1"], ["WRITE", "m2"], ["READ", "m3"]]);
    await redis.call("LOCK.ACQUIRE", "m1", "other:1", "10000");
    assert.equal(await multi.acquire({ wait: 0, lease: 5_000 }), false);
    assert.equal(await redis.exists("m2", "m3"), 0);
    await redis.call("LOCK.UNLOCK", "m1", "other:1");
    assert.equal(await multi.acquire({ wait: 0, lease: 5_000 }), true);
    assert.equal(await redis.hget("m1", multi.owner), "1");
    assert.equal(await redis.hget("m2", "mode"), "write");
    assert.equal(await redis.hget("m3", "mode"), "read");
    await multi.release();
    assert.equal(await redis.exists("m1", "m2", "m3"), 0);
    await assert.rejects(multi.release(), NotHeld);
    assert.throws(() => locks.multiLock([]), LockError);
    assert.throws(() => locks.multiLock([["BOTH" as "LOCK", "x"]]), LockError);
    assert.throws(() => locks.multiLock([multi]), TypeError);
  });

  it("session holds live on their connection: released by the lock, or by the connection's end", async () => {
    const lock = locks.lock("sess", { session: true });
    await lock.acquire({ wait: 0 });
    await lock.acquire({ wait: 0 });
    assert.equal(await redis.hget("sess", lock.owner), "2");
    await lock.release();
    assert.equal(lock.held, true);
    await lock.release();
    assert.equal(await redis.exists("sess"), 0);

    await lock.acquire({ wait: 0 });
    assert.equal(await redis.exists("sess"), 1);
    // The dedicated connection is killed: the server frees the session's holds.
    const list = String(await redis.call("CLIENT", "LIST"));
    const ids = [...list.matchAll(/id=(\d+) .*cmd=(\S+)/g)].filter((m) => m[2] === "info" || m[2] === "lock.acquire").map((m) => m[1]!);
    assert.ok(ids.length >= 1, list);
    for (const id of ids) {
      await redis.call("CLIENT", "KILL", "ID", id);
    }
    assert.equal(await redis.exists("sess"), 0);
    await assert.rejects(lock.release(), NotHeld);
    assert.equal(lock.held, false);
  });

  it("bad input is refused before anything is sent", async () => {
    const lock = locks.lock("bad");
    await assert.rejects(lock.acquire({ lease: -1 }), RangeError);
    await assert.rejects(lock.acquire({ lease: Number.NaN }), TypeError);
    await assert.rejects(lock.acquire({ wait: -5 }), RangeError);
    assert.throws(() => new Client(redis, { watchdogTimeout: 0 }), RangeError);
    assert.throws(() => new Client(redis, { sync: { timeout: -1 } }), RangeError);
    assert.throws(() => locks.lock(""), LockError);
    assert.throws(() => new Client({} as Redis), TypeError);
    assert.throws(() => new Client(server.client({ keyPrefix: "app:", lazyConnect: true })), /keyPrefix/);
    assert.equal(await redis.dbsize(), 0);
    // The server's own refusals pass through as ioredis's ReplyError.
    await assert.rejects(locks.lock("a{b").acquire({ wait: 0 }), (e: Error) => e.name === "ReplyError");
  });
});
