/**
 * Idempotent acquisitions and releases: every single-lock acquisition and
 * release (but a session's, and a last release's 1) sends `HELD n`, the
 * owner's holds of that kind before it, and a lost reply (the connection closed, or a reply that
 * never comes) is resent once as it is, through a proxy that loses it for
 * real: one hold on the server, whatever the kind, and nothing else
 * written. A release's lost reply too: a re-entered hold's resend frees
 * one level only; the last hold's resend cannot tell "this release freed
 * it" from "it was gone before": `ReleaseUnknown`, never "released".
 */

import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import type { Redis } from "ioredis";
import { Client, NotHeld, ReleaseUnknown, type Lock } from "../src/index";
import { FaultProxy } from "./proxy";
import { infoField, Server, waitUntil } from "./support";

interface Kind {
  kind: string;
  command: string;
  make: (locks: Client, name: string) => Lock;
  /** A raw holder in the way, and its release; "" is the lock's name. */
  hold: string[];
  free: string[];
}

const plainHold = ["LOCK.ACQUIRE", "", "other:1", "10000"];
const plainFree = ["LOCK.UNLOCK", "", "other:1"];
const writeHold = ["RWLOCK.WRITE", "", "other:1", "10000"];
const writeFree = ["RWLOCK.UNLOCK", "", "other:1", "WRITE"];

const KINDS: Kind[] = [
  { kind: "plain", command: "LOCK.ACQUIRE", make: (l, n) => l.lock(n), hold: plainHold, free: plainFree },
  { kind: "fenced", command: "LOCK.ACQUIRE", make: (l, n) => l.fencedLock(n), hold: plainHold, free: plainFree },
  { kind: "nonreentrant", command: "LOCK.ACQUIRE", make: (l, n) => l.lock(n, { reentrant: false }), hold: plainHold, free: plainFree },
  { kind: "session", command: "LOCK.ACQUIRE", make: (l, n) => l.lock(n, { session: true }), hold: plainHold, free: plainFree },
  { kind: "read", command: "RWLOCK.READ", make: (l, n) => l.readWriteLock(n).readLock(), hold: writeHold, free: writeFree },
  { kind: "write", command: "RWLOCK.WRITE", make: (l, n) => l.readWriteLock(n, { fenced: true }).writeLock(), hold: writeHold, free: writeFree },
  {
    kind: "fair",
    command: "FAIRLOCK.ACQUIRE",
    make: (l, n) => l.fairLock(n),
    hold: ["FAIRLOCK.ACQUIRE", "", "other:1", "10000"],
    free: ["FAIRLOCK.UNLOCK", "", "other:1"],
  },
];

function raw(words: string[], name: string): [string, ...string[]] {
  const [command, ...rest] = words.map((w) => (w === "" ? name : w));
  return [command!, ...rest];
}

describe("idempotent acquisitions", () => {
  let server: Server;
  let redis: Redis;

  before(async () => {
    server = await Server.start();
    redis = server.client();
  });
  after(async () => {
    await server.stop();
  });

  for (const k of KINDS) {
    for (const waiting of [false, true]) {
      const name = `lost:${k.kind}${waiting ? ":wait" : ""}`;
      it(`${name}: the reply lost once, one hold on the server`, async () => {
        // A wait's reply lost is its BLOCK's, on a dedicated connection
        // (its try, on the application's connection, was refused).
        const proxy = await FaultProxy.start(server.port, k.command, name, false, waiting ? ["BLOCK"] : []);
        const app = server.client({ port: proxy.port });
        const locks = new Client(app);
        try {
          // A warm-up on another lock: the dedicated connection's CLIENT ID
          // is answered before the acquisition whose reply is lost.
          const warm = k.make(locks, `${name}:warm`);
          await warm.acquire({ wait: 0, lease: 5_000 });
          await warm.release();
          const lock = k.make(locks, name);
          let options = { wait: 0 as number | null, lease: 10_000 };
          // When the holder's release was sent: the waiter cannot be served before it, however slow the machine.
          let freeing = Infinity;
          if (waiting) {
            await redis.call(...raw(k.hold, name));
            setTimeout(() => {
              freeing = performance.now();
              void redis.call(...raw(k.free, name));
            }, 300);
            options = { wait: 5_000, lease: 10_000 };
          }
          await redis.call("CONFIG", "RESETSTAT");
          assert.equal(await lock.acquire(options), true);
          const served = performance.now();
          assert.ok(proxy.fired, "the proxy lost no reply");
          // Resent once as it was (HELD 0; a session's plain), by the
          // handle on a dedicated connection: the client object's own
          // connection, where a try goes, resends nothing itself after it
          // reconnects. The server's replay writes for a WAIT to cover: no
          // PEXPIRE.
          const sends = waiting && k.kind !== "session" ? 3 : 2; // a wait's try first, but a session's
          const stats = await redis.info("commandstats");
          assert.match(stats, new RegExp(`cmdstat_${k.command.toLowerCase().replace(".", "\\.")}:calls=${sends},`), "the lost send and its resend");
          assert.doesNotMatch(stats, /cmdstat_pexpire:/);
          if (waiting) {
            assert.ok(served >= freeing, "served before the holder left");
          }
          const field = k.kind === "write" ? `${lock.owner}:write` : lock.owner;
          // A session's: once the server saw the first connection close, which frees what it took.
          await waitUntil("one hold", async () => (await redis.hget(name, field)) === "1", 2_000);
          if (k.kind === "fenced" || k.kind === "write") {
            assert.equal(String(lock.token), await redis.get(`redisson_lock_token:{${name}}`));
          }
          if (k.kind === "session") {
            assert.equal(await infoField(redis, "rwlock_sessions", "rwlock_session_holds"), "1");
          }
          await lock.release();
          assert.equal(await redis.exists(name), 0, "one release left a hold");
          assert.deepEqual(await redis.keys("redisson_*latch*"), [], "no latch");
        } finally {
          await locks.close();
          app.disconnect();
          await proxy.close();
        }
      });
    }
  }

  it("what a handle sends (MONITOR): HELD with the holds before each acquisition and release, per kind; a session's and a multi-lock's none", async () => {
    await redis.flushall();
    await using locks = new Client(redis);
    // The client object learns the master (INFO) on its first acquisition.
    await (await locks.lock("held:warm").hold({ wait: 0 })).release();
    const monitor = await server.client().monitor();
    const sent: string[] = [];
    monitor.on("monitor", (_time: string, args: string[]) => {
      // The package's commands (this test's own ioredis calls are lower-case).
      if (/^[A-Z]/.test(args[0] ?? "") && args.some((a) => a.includes("held"))) {
        sent.push(args.join(" "));
      }
    });
    const plain = locks.lock("held:plain");
    assert.equal(await plain.acquire({ lease: 5_000 }), true);
    assert.equal(await plain.acquire({ wait: 0, lease: 5_000 }), true);
    assert.equal(await redis.hget("held:plain", plain.owner), "2");
    await plain.release();
    await plain.release();
    assert.equal(await redis.exists("held:plain"), 0);
    // A read-write lock's sides share the owner but count apart (two fields).
    const rw = locks.readWriteLock("held:rw");
    assert.equal(await rw.writeLock().acquire({ wait: 0, lease: 5_000 }), true);
    assert.equal(await rw.readLock().acquire({ wait: 0, lease: 5_000 }), true);
    await rw.writeLock().release();
    await rw.readLock().release();
    const fair = locks.fairLock("held:fair");
    assert.equal(await fair.acquire({ wait: 0, lease: 5_000 }), true);
    await fair.release();
    const session = locks.lock("held:session", { session: true });
    assert.equal(await session.acquire({ wait: 0, lease: 5_000 }), true);
    await session.release();
    const multi = locks.multiLock([["LOCK", "{held}:a"], ["WRITE", "{held}:b"]]);
    assert.equal(await multi.acquire({ wait: 0, lease: 5_000 }), true);
    await multi.release();
    // A handle holding nothing sends no HELD, nor a last release (HELD 1, never replayed).
    await assert.rejects(plain.release(), NotHeld);
    const expected = [
      `LOCK.ACQUIRE held:plain ${plain.owner} 5000 HELD 0`,
      `LOCK.ACQUIRE held:plain ${plain.owner} 5000 HELD 1`,
      `LOCK.UNLOCK held:plain ${plain.owner} LEASE 5000 HELD 2`,
      `LOCK.UNLOCK held:plain ${plain.owner} LEASE 5000`,
      `RWLOCK.WRITE held:rw ${rw.owner} 5000 HELD 0`,
      `RWLOCK.READ held:rw ${rw.owner} 5000 HELD 0`,
      `RWLOCK.UNLOCK held:rw ${rw.owner} WRITE LEASE 5000`,
      `RWLOCK.UNLOCK held:rw ${rw.owner} READ LEASE 5000`,
      `FAIRLOCK.ACQUIRE held:fair ${fair.owner} 5000 NOQUEUE HELD 0`,
      `FAIRLOCK.UNLOCK held:fair ${fair.owner} LEASE 5000`,
      `LOCK.ACQUIRE held:session ${session.owner} 5000 SESSION`,
      `LOCK.UNLOCK held:session ${session.owner} LEASE 5000`,
      `LOCK.ACQUIREALL ${multi.owner} 5000 HOLDS 2 LOCK {held}:a WRITE {held}:b`,
      `LOCK.UNLOCKALL ${multi.owner} HOLDS 2 LOCK {held}:a WRITE {held}:b`,
      `LOCK.UNLOCK held:plain ${plain.owner} LEASE 5000`,
    ];
    await waitUntil("MONITOR to show every command", () => sent.length >= expected.length);
    monitor.disconnect();
    assert.deepEqual(sent, expected);
    assert.deepEqual(await redis.keys("*held*"), [], "no latch, nothing left");
  });

  // A release's reply lost after it ran, its resend (by the handle, on a
  // dedicated connection) carrying the same HELD: a re-entered hold's is answered 0 (one level freed, as
  // the first send did); the last hold's (no HELD: 1 is never replayed) finds
  // nothing held and cannot tell why: ReleaseUnknown, the lock free.
  const releases: { kind: string; command: string; make: (l: Client, n: string) => Lock }[] = [
    { kind: "plain", command: "LOCK.UNLOCK", make: (l, n) => l.lock(n) },
    { kind: "read", command: "RWLOCK.UNLOCK", make: (l, n) => l.readWriteLock(n).readLock() },
    { kind: "write", command: "RWLOCK.UNLOCK", make: (l, n) => l.readWriteLock(n).writeLock() },
    { kind: "fair", command: "FAIRLOCK.UNLOCK", make: (l, n) => l.fairLock(n) },
  ];
  /**
   * Runs `body` with a Client whose connection goes through a proxy that
   * loses one reply of `command` on `name`, and `calls`: the commandstats
   * line of that command sent twice (the release and its resend).
   */
  async function throughLostReplies(
    command: string,
    name: string,
    body: (locks: Client, proxy: FaultProxy, calls: RegExp) => Promise<void>,
  ): Promise<void> {
    const proxy = await FaultProxy.start(server.port, command, name);
    const app = server.client({ port: proxy.port });
    const locks = new Client(app);
    const calls = new RegExp(`cmdstat_${command.toLowerCase().replace(".", "\\.")}:calls=2,`);
    try {
      await body(locks, proxy, calls);
    } finally {
      await locks.close();
      app.disconnect();
      await proxy.close();
    }
  }

  for (const k of releases) {
    const name = `relost-${k.kind}`;
    it(`${name}: a re-entered release's reply lost frees one level; the last one's lost reply is ReleaseUnknown, the lock free`, async () => {
      await throughLostReplies(k.command, name, async (locks, proxy, calls) => {
        const lock = k.make(locks, name);
        const field = k.kind === "write" ? `${lock.owner}:write` : lock.owner;
        assert.equal(await lock.acquire({ wait: 0, lease: 10_000 }), true);
        assert.equal(await lock.acquire({ wait: 0, lease: 10_000 }), true);
        assert.equal(await redis.hget(name, field), "2");

        await redis.call("CONFIG", "RESETSTAT");
        await lock.release();
        assert.ok(proxy.fired, "the proxy lost the first release's reply");
        assert.match(await redis.info("commandstats"), calls, "the release and its resend");
        assert.equal(await redis.hget(name, field), "1", "the resend changed nothing (HELD 2, the owner holding 1)");
        assert.equal(lock.held, true);

        proxy.rearm();
        await redis.call("CONFIG", "RESETSTAT");
        await assert.rejects(lock.release(), ReleaseUnknown);
        assert.ok(proxy.fired, "the proxy lost the last release's reply");
        assert.match(await redis.info("commandstats"), calls, "the last release and its resend");
        assert.equal(lock.held, false);
        assert.equal(await redis.exists(name), 0, "the first send freed it");
        assert.deepEqual(await redis.keys("redisson_*latch*"), [], "no latch");

        // A second cycle on the same handle starts from nothing (HELD 0).
        assert.equal(await lock.acquire({ wait: 0, lease: 10_000 }), true);
        assert.equal(await redis.hget(name, field), "1");
        await lock.release();
        assert.equal(await redis.exists(name), 0);
      });
    });
  }

  // The hold gone before its release (as after a lease run out or a
  // failover), its key then missing or another owner's, the release's reply
  // lost: the first send held nothing, the resend holds nothing either.
  // The last hold's: the caller hears ReleaseUnknown (it cannot be told
  // from a first send that freed it), never "released"; a re-entered
  // hold's (HELD 2, the owner holding none, not 1): NotHeld.
  for (const k of releases) {
    for (const taken of [false, true]) {
      for (const holds of [1, 2]) {
        const name = `relost-gone-${k.kind}-${taken ? "taken" : "missing"}-${holds}`;
        const error = holds === 1 ? ReleaseUnknown : NotHeld;
        it(`${name}: ${holds === 1 ? "the last" : "a re-entered"} hold gone before its release, the release's reply lost: ${error.name}`, async () => {
          await throughLostReplies(k.command, name, async (locks, proxy, calls) => {
            const lock = k.make(locks, name);
            for (let i = 0; i < holds; i++) {
              assert.equal(await lock.acquire({ wait: 0, lease: 10_000 }), true);
            }
            assert.equal(await redis.del(name), 1);
            const rw = k.kind === "read" || k.kind === "write";
            if (taken) {
              await redis.call(...raw(rw ? writeHold : plainHold, name));
            }

            await redis.call("CONFIG", "RESETSTAT");
            const rejected = await lock.release().then(
              () => assert.fail("released"),
              (e: unknown) => e,
            );
            assert.ok(rejected instanceof error, String(rejected));
            assert.ok(!(rejected instanceof (holds === 1 ? NotHeld : ReleaseUnknown)), "one kind, not the other");
            assert.ok(proxy.fired, "the proxy lost the release's reply");
            assert.match(await redis.info("commandstats"), calls, "the release and its resend");
            assert.equal(lock.held, false);
            if (taken) {
              assert.equal(await redis.hget(name, rw ? "other:1:write" : "other:1"), "1", "the other owner's hold untouched");
            } else {
              assert.equal(await redis.exists(name), 0);
            }
            assert.deepEqual(await redis.keys("redisson_*latch*"), [], "no latch");
          });
        });
      }
    }
  }

  it("a reply that never comes (the connection left open) is resent after the wait's margin", async () => {
    const proxy = await FaultProxy.start(server.port, "RWLOCK.WRITE", "req:stall", true);
    const app = server.client({ port: proxy.port });
    const locks = new Client(app, { replyMargin: 300 });
    try {
      const warm = locks.readWriteLock("req:warm").writeLock();
      await warm.acquire({ wait: 0, lease: 5_000 });
      await warm.release();
      const lock = locks.readWriteLock("req:stall").writeLock();
      const started = performance.now();
      assert.equal(await lock.acquire({ wait: 0 }), true);
      assert.ok(proxy.fired && performance.now() - started >= 250);
      assert.equal(await redis.hget("req:stall", `${lock.owner}:write`), "1");
      // The stalled connection was closed when the margin ran out: the
      // release goes on a fresh one, and its reply comes.
      await lock.release();
      assert.equal(await redis.exists("req:stall"), 0);
      // An abort is not a lost reply: no resend.
      await assert.rejects(lock.acquire({ wait: 0, signal: AbortSignal.abort() }), { name: "AbortError" });
      await sleep(10);
      assert.equal(await redis.exists("req:stall"), 0);
    } finally {
      await locks.close();
      app.disconnect();
      await proxy.close();
    }
  });
});
