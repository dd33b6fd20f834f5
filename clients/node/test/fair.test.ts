/**
 * The fair lock: waiters served in arrival order, a timed-out or aborted
 * wait leaving the line, a try never joining it, re-entry and release, the
 * watchdog, the non-reentrant fair lock.
 */

import { after, before, beforeEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import type { Redis } from "ioredis";
import { LockError, Client, NotAcquired, NotHeld, NotReentrant } from "../src/index";
import { infoField, Server, waitUntil } from "./support";

/** The owners in a fair lock's line, in order (FAIRLOCK.INFO). */
async function line(redis: Redis, name: string): Promise<string[]> {
  const info = (await redis.call("FAIRLOCK.INFO", name)) as unknown[];
  const at = info.indexOf("line");
  return ((info[at + 1] as unknown[][]) ?? []).map((entry) => String(entry[1]));
}

/** Nothing left on the server: no line, no timeouts, no latch (acquisitions and releases send HELD). */
async function nothingLeft(redis: Redis): Promise<void> {
  assert.deepEqual(await redis.keys("*"), []);
}

describe("fair lock", () => {
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

  it("four waiters are served in the order they arrived, each waiting in the line on the server", async () => {
    await using locks = new Client(redis);
    const holder = locks.fairLock("fair:order");
    assert.equal(await holder.acquire({ wait: 0, lease: 10_000 }), true);
    const served: string[] = [];
    const waiters = [0, 1, 2, 3].map(() => locks.fairLock("fair:order"));
    const done: Promise<void>[] = [];
    for (const [i, waiter] of waiters.entries()) {
      done.push(
        (async () => {
          assert.equal(await waiter.acquire({ wait: 10_000, lease: 10_000 }), true);
          served.push(waiter.owner);
          await sleep(20);
          await waiter.release();
        })(),
      );
      // In the line before the next arrives.
      await waitUntil(`waiter ${i} in the line`, async () => (await line(redis, "fair:order")).length === i + 1, 5_000);
    }
    const arrived = waiters.map((w) => w.owner);
    assert.deepEqual(await line(redis, "fair:order"), arrived);
    await holder.release();
    await Promise.all(done);
    assert.deepEqual(served, arrived);
    await nothingLeft(redis);
  });

  it("a wait that runs out and an aborted one leave the line; a try never joins it; nothing is left", async () => {
    await using locks = new Client(redis);
    const holder = locks.fairLock("fair:leave");
    await holder.acquire({ wait: 0, lease: 10_000 });
    const lock = locks.fairLock("fair:leave", { fairWait: 5_000 });

    const started = performance.now();
    assert.equal(await lock.acquire({ wait: 300 }), false);
    assert.ok(performance.now() - started >= 250);
    assert.deepEqual(await line(redis, "fair:leave"), []);

    const controller = new AbortController();
    const waiting = lock.acquire({ signal: controller.signal });
    await waitUntil("the waiter in the line", async () => (await line(redis, "fair:leave")).length === 1, 5_000);
    // Its deadline counts the given WAIT (5 s), not the server's 300 s.
    const info = (await redis.call("FAIRLOCK.INFO", "fair:leave")) as unknown[];
    const entry = (info[info.indexOf("line") + 1] as unknown[][])[0]!;
    const [seconds] = (await redis.call("TIME")) as [string, string];
    assert.ok(Number(entry[3]) - Number(seconds) * 1000 < 60_000, String(entry[3]));
    controller.abort(new Error("shutting down"));
    await assert.rejects(waiting, /shutting down/);
    await waitUntil("the line empty", async () => (await line(redis, "fair:leave")).length === 0, 2_000);
    assert.equal(await infoField(redis, "clients", "blocked_clients"), "0");
    assert.equal(lock.held, false);

    // A try: NOQUEUE, refused at once without a PTTL, never in the line.
    await assert.rejects(lock.hold({ wait: 0 }), (e: unknown) => e instanceof NotAcquired && e.pttl === null);
    assert.deepEqual(await line(redis, "fair:leave"), []);
    await holder.release();
    await nothingLeft(redis);
  });

  it("re-entry and its release (no latch), the watchdog, a hold forced open found lost", async () => {
    await using locks = new Client(redis, { watchdogTimeout: 1_000 });
    const lock = locks.fairLock("fair:holds");
    assert.equal(lock.fair, true);
    await lock.acquire({ wait: 0 });
    await lock.acquire({ wait: 0 });
    assert.equal(await redis.hget("fair:holds", lock.owner), "2");
    await sleep(2_500); // past the 1 s lease: the watchdog renews it (LOCK.RENEW)
    assert.ok((await redis.pttl("fair:holds")) > 0);
    assert.equal(lock.held, true);
    await lock.release();
    assert.equal(await redis.hget("fair:holds", lock.owner), "1");
    assert.deepEqual(await redis.keys("redisson_*"), [], "no latch");
    const lost = new Promise<string>((done) => lock.once("lost", done));
    await redis.call("FAIRLOCK.FORCEUNLOCK", "fair:holds");
    assert.equal(await lost, lock.owner);
    // FAIRLOCK.UNLOCK of a lock gone replies nil.
    await assert.rejects(lock.release(), NotHeld);
    await nothingLeft(redis);
  });

  it("the non-reentrant fair lock, and the options refused", async () => {
    await using locks = new Client(redis);
    const lock = locks.fairLock("fair:nr", { reentrant: false });
    await lock.acquire({ wait: 0, lease: 5_000 });
    await assert.rejects(lock.acquire({ wait: 0 }), NotReentrant);
    assert.equal(await redis.hget("fair:nr", lock.owner), "1");
    await lock.release();
    assert.throws(() => locks.fairLock("x", { session: true } as never), LockError);
    assert.throws(() => locks.fairLock("x", { fairWait: 0 }), RangeError);
    assert.throws(() => locks.multiLock([locks.fairLock("x")]), TypeError);
    await nothingLeft(redis);
  });
});
