/**
 * Idempotent acquisitions: every single-lock acquisition sends `REQUEST`,
 * and a lost reply (the connection closed, or a reply that never comes) is
 * resent once with the same request id, through a proxy that loses it for
 * real: one hold on the server, whatever the kind. A release's lost reply
 * too: its resend is answered from the release's latch, with what the
 * first send did: a re-entered hold's frees one level only, the last one's
 * released, a hold already gone NotHeld.
 */

import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import type { Redis } from "ioredis";
import { Client, NotHeld, type Lock } from "../src/index";
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
          // Resent on a dedicated connection (a wait's, a session's), then
          // one PEXPIRE of its latch on the new connection, for the replica
          // check's WAIT to cover the grant. A try without a session goes on
          // the application's connection, which ioredis reconnects and
          // resends it on (autoResendUnfulfilledCommands): no WAIT follows
          // it there, so no PEXPIRE either.
          const dedicated = waiting || k.kind === "session";
          const sends = waiting && k.kind !== "session" ? 3 : 2; // a wait's try first, but a session's
          const stats = await redis.info("commandstats");
          assert.match(stats, new RegExp(`cmdstat_${k.command.toLowerCase().replace(".", "\\.")}:calls=${sends},`), "the lost send and its resend");
          if (dedicated) {
            assert.match(stats, /cmdstat_pexpire:calls=1,/);
          } else {
            assert.doesNotMatch(stats, /cmdstat_pexpire:/);
          }
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
          // The release's DEL took the acquisition's latch too. A session's
          // two sends each took a hold (the first freed with its
          // connection) under an id of its own; its release sends no DEL,
          // and the latches expire.
          const latches = await redis.keys(`redisson_lock_request_latch:{${name}}:*`);
          assert.equal(latches.length, k.kind === "session" ? 2 : 0, String(latches));
        } finally {
          await locks.close();
          app.disconnect();
          await proxy.close();
        }
      });
    }
  }

  it("an acquisition sends REQUEST (the latch holds the token, 13.5 s); a multi-lock's does not", async () => {
    await redis.flushall();
    await using locks = new Client(redis);
    const lock = locks.fencedLock("req:plain");
    await lock.acquire({ wait: 0, lease: 5_000 });
    const keys = await redis.keys("redisson_lock_request_latch:*");
    assert.equal(keys.length, 1);
    assert.match(keys[0]!, /^redisson_lock_request_latch:\{req:plain\}:[0-9a-f]{32}$/);
    const pttl = await redis.pttl(keys[0]!);
    assert.ok(pttl > 12_000 && pttl <= 13_500, String(pttl));
    assert.equal(await redis.get(keys[0]!), String(lock.token));
    await lock.release();
    const multi = locks.multiLock([["LOCK", "{req}:a"], ["WRITE", "{req}:b"]]);
    await multi.acquire({ wait: 0, lease: 5_000 });
    assert.deepEqual(await redis.keys("redisson_lock_request_latch:*"), []);
    await multi.release();
    // The fencing counter, and the single lock's release latch (a multi-lock's release has none).
    const left = (await redis.keys("*")).sort();
    assert.equal(left.length, 2, String(left));
    assert.equal(left[0], "redisson_lock_token:{req:plain}");
    assert.match(left[1]!, /^redisson_unlock_latch:\{req:plain\}:[0-9a-f]{32}$/);
  });

  // A release's pipeline (the release, then the DEL of latches) lost after
  // both ran: every release keeps its own latch out of that DEL, so its
  // resend is answered from it: a re-entered hold's leaves one level held,
  // the last one's says released (and its latch stays for the handle's
  // next release, or its 13.5 s), a hold gone before its release NotHeld.
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
    it(`${name}: a re-entered release's reply lost frees one level; the last one's lost reply still releases`, async () => {
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
        assert.equal(await redis.hget(name, field), "1", "the resend was answered from its latch");
        assert.equal(lock.held, true);
        assert.equal((await redis.keys(`redisson_unlock_latch:{${name}}:*`)).length, 1, "the latch outlives its reply");

        proxy.rearm();
        await redis.call("CONFIG", "RESETSTAT");
        await lock.release(); // the last: its resend answered "released" from its latch
        assert.ok(proxy.fired, "the proxy lost the last release's reply");
        assert.match(await redis.info("commandstats"), calls, "the last release and its resend");
        assert.equal(lock.held, false);
        assert.equal(await redis.exists(name), 0);
        // The re-entered release's latch went with this one's DEL; this
        // one's own stays, expiring, for the handle's next release.
        const left = await redis.keys(`*${name}*`);
        assert.equal(left.length, 1, String(left));
        assert.match(left[0]!, new RegExp(`^redisson_unlock_latch:\\{${name}\\}:[0-9a-f]{32}$`));
        const pttl = await redis.pttl(left[0]!);
        assert.ok(pttl > 0 && pttl <= 13_500, String(pttl));

        // A second cycle on the same handle: its release's DEL takes the first one's latch.
        assert.equal(await lock.acquire({ wait: 0, lease: 10_000 }), true);
        await lock.release();
        const next = await redis.keys(`*${name}*`);
        assert.equal(next.length, 1, String(next));
        assert.notEqual(next[0], left[0], "the first cycle's latch deleted");
      });
    });
  }

  // The hold gone before its release (as after a lease run out or a
  // failover), its key then missing or another owner's, the release's reply
  // lost: the first send held nothing (every kind's release then replies
  // nil and stores no latch, where Redisson's read-write and fair scripts
  // latch 1 for a missing lock), the resend holds nothing either, and the
  // caller hears NotHeld, not that its hold lasted until the release.
  for (const k of releases) {
    for (const taken of [false, true]) {
      const name = `relost-gone-${k.kind}-${taken ? "taken" : "missing"}`;
      it(`${name}: a hold gone before its release, the release's reply lost: NotHeld`, async () => {
        await throughLostReplies(k.command, name, async (locks, proxy, calls) => {
          const lock = k.make(locks, name);
          assert.equal(await lock.acquire({ wait: 0, lease: 10_000 }), true);
          assert.equal(await redis.del(name), 1);
          const rw = k.kind === "read" || k.kind === "write";
          if (taken) {
            await redis.call(...raw(rw ? writeHold : plainHold, name));
          }

          await redis.call("CONFIG", "RESETSTAT");
          await assert.rejects(lock.release(), NotHeld);
          assert.ok(proxy.fired, "the proxy lost the release's reply");
          assert.match(await redis.info("commandstats"), calls, "the release and its resend");
          assert.equal(lock.held, false);
          assert.deepEqual(await redis.keys(`redisson_unlock_latch:*${name}*`), [], "no latch stored");
          if (taken) {
            assert.equal(await redis.hget(name, rw ? "other:1:write" : "other:1"), "1", "the other owner's hold untouched");
          } else {
            assert.equal(await redis.exists(name), 0);
          }
        });
      });
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
