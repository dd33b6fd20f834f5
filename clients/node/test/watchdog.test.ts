/** The watchdog: keeping a 1 s lease for 3.5 s, and reporting a lost hold. */

import { after, before, beforeEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import type { Redis } from "ioredis";
import { Client, NotHeld, type Lock } from "../src/index";
import { Server } from "./support";

/** Waits until the watchdog finds the hold gone: at its next renewal, a third of the lease away, later on a loaded machine. */
async function lostWithin(lock: Lock, ms: number): Promise<void> {
  for (const deadline = Date.now() + ms; !lock.lost && Date.now() < deadline; ) {
    await sleep(10);
  }
  assert.equal(lock.lost, true, `not lost within ${ms} ms`);
}

describe("watchdog", () => {
  let server: Server;
  let redis: Redis;

  before(async () => {
    server = await Server.start();
    redis = server.client();
  });
  beforeEach(async () => {
    await redis.flushall();
  });
  after(async () => {
    await server.stop();
  });

  it("keeps a 1 s lease of every kind for 3.5 s, and stops at the release", async () => {
    await using locks = new Client(redis, { watchdogTimeout: 1_000 });
    const plain = locks.lock("wd:plain");
    const write = locks.readWriteLock("wd:rw").writeLock();
    const multi = locks.multiLock([["LOCK", "wd:m1"], ["READ", "wd:m2"]]);
    const holds = await Promise.all([plain, write, multi].map((l) => l.hold({ wait: 0 })));
    assert.ok((await redis.pttl("wd:plain")) <= 1_000);
    await sleep(3_500);
    for (const key of ["wd:plain", "wd:rw", "wd:m1", "wd:m2"]) {
      const pttl = await redis.pttl(key);
      assert.ok(pttl > 0 && pttl <= 1_000, `${key}: ${pttl}`);
    }
    for (const lock of [plain, write, multi]) {
      assert.equal(lock.held, true);
      assert.equal(lock.lost, false);
    }
    await Promise.all(holds.map((h) => h.release()));
    await redis.call("CONFIG", "RESETSTAT");
    await sleep(700);
    assert.doesNotMatch(await redis.info("commandstats"), /cmdstat_(lock|rwlock)\.renew/);
    assert.equal(await redis.exists("wd:plain", "wd:rw", "wd:m1", "wd:m2"), 0);
  });

  it("reports a hold forced open: the lost event, onLost, the hold's signal; release is NotHeld", async () => {
    await using locks = new Client(redis, { watchdogTimeout: 1_000 });
    const called: string[] = [];
    const lock = locks.lock("wd:lost", { onLost: (l: Lock, owner: string) => called.push(`${l.name} ${owner}`) });
    const events: string[] = [];
    lock.on("lost", (owner) => events.push(owner));
    const hold = await lock.hold({ wait: 0 });
    assert.equal(hold.signal.aborted, false);
    assert.equal(await redis.call("LOCK.FORCEUNLOCK", "wd:lost"), 1);
    await lostWithin(lock, 10_000);
    assert.equal(lock.held, false);
    assert.deepEqual(events, [lock.owner]);
    assert.deepEqual(called, [`wd:lost ${lock.owner}`]);
    assert.equal(hold.signal.aborted, true);
    assert.ok(hold.signal.reason instanceof NotHeld);
    await assert.rejects(hold.release(), NotHeld);
    assert.equal(lock.lost, false, "forgotten after the release");
    // Taken again after a loss without a release in between: a new series of holds.
    await lock.acquire({ wait: 0 });
    await redis.call("LOCK.FORCEUNLOCK", "wd:lost");
    await lostWithin(lock, 10_000);
    assert.equal(await lock.acquire({ wait: 0, lease: 5_000 }), true);
    assert.equal(lock.held, true);
    await lock.release();
    assert.equal(lock.held, false, "one release ends the new series");
    assert.equal(await redis.exists("wd:lost"), 0);
  });

  it("a lease given: no watchdog, the hold ends with it", async () => {
    await using locks = new Client(redis, { watchdogTimeout: 1_000 });
    const lock = locks.lock("wd:lease");
    await lock.acquire({ wait: 0, lease: 500 });
    await sleep(800);
    assert.equal(await redis.exists("wd:lease"), 0);
    await assert.rejects(lock.release(), NotHeld);
  });

  it("close() stops the watchdogs", async () => {
    const locks = new Client(redis, { watchdogTimeout: 600 });
    await locks.lock("wd:close").acquire({ wait: 0 });
    await locks.close();
    await sleep(900);
    assert.equal(await redis.exists("wd:close"), 0);
  });
});
