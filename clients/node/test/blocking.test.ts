/**
 * Waits on the server: a BLOCK longer than the application's command
 * timeout, waits served while other commands go on, an AbortSignal ending
 * the server-side wait, the try on the application's connection before a
 * wait, and concurrent uncontended cycles written together.
 */

import { after, before, beforeEach, describe, it } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import type { Redis } from "ioredis";
import { Client, NotAcquired } from "../src/index";
import { infoField, Server } from "./support";

describe("waiting", () => {
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

  it("a 2 s BLOCK on an application connection with a 300 ms commandTimeout, other commands going on meanwhile", async () => {
    const app = server.client({ commandTimeout: 300 });
    await using locks = new Client(app);
    await redis.call("LOCK.ACQUIRE", "long", "other:1", "10000");
    setTimeout(() => void redis.call("LOCK.UNLOCK", "long", "other:1"), 2_000);
    const started = performance.now();
    const waiting = locks.lock("long").hold({ wait: 8_000, lease: 5_000 });
    // The application's connection is not stalled by the wait.
    const pingStarted = performance.now();
    assert.equal(await app.ping(), "PONG");
    // Answered while the wait goes on: a connection the wait stalled would answer at the
    // release, 2 s on; 1 s leaves a loaded machine room.
    assert.ok(performance.now() - pingStarted < 1_000);
    const hold = await waiting;
    const elapsed = performance.now() - started;
    assert.ok(elapsed >= 1_900 && elapsed < 5_000, `${elapsed}`);
    await hold.release();
    // A bare command of that length on the application's connection times out: the wait needed its own.
    await redis.call("LOCK.ACQUIRE", "long", "other:1", "10000");
    await assert.rejects(app.call("LOCK.ACQUIRE", "long", "other:2", "1000", "BLOCK", "1000"), /timed out/i);
  });

  it("a wait that runs out resolves false (hold: NotAcquired) and leaves nothing", async () => {
    await using locks = new Client(redis);
    await redis.call("LOCK.ACQUIRE", "busy", "other:1", "10000");
    const lock = locks.lock("busy");
    const started = performance.now();
    assert.equal(await lock.acquire({ wait: 400, lease: 5_000 }), false);
    assert.ok(performance.now() - started >= 350);
    await assert.rejects(lock.hold({ wait: 100 }), NotAcquired);
    assert.equal(await redis.hlen("busy"), 1);
    assert.equal(await infoField(redis, "clients", "blocked_clients"), "0");
  });

  it("an abort ends the server-side wait: rejects with the reason, no blocked client, nothing held", async () => {
    await using locks = new Client(redis);
    await redis.call("LOCK.ACQUIRE", "abort", "other:1", "60000");
    const lock = locks.lock("abort");
    const controller = new AbortController();
    const waiting = lock.acquire({ signal: controller.signal }); // without limit
    await waitBlocked(redis, 1);
    await redis.call("CONFIG", "RESETSTAT");
    const started = performance.now();
    controller.abort(new Error("shutting down"));
    await assert.rejects(waiting, /shutting down/);
    // At the abort, not never (the wait has no limit, the hold 60 s): 5 s leave a loaded machine room.
    assert.ok(performance.now() - started < 5_000);
    await waitBlocked(redis, 0);
    // One CLIENT UNBLOCK ended it (the module answers it as the wait's timeout).
    assert.match(await redis.info("commandstats"), /cmdstat_client\|unblock:calls=1,/);
    assert.equal(lock.held, false);
    assert.equal(await redis.hexists("abort", lock.owner), 0);
    // Once the lock is free, the next wait is served: nothing of the aborted one lingers.
    await redis.call("LOCK.UNLOCK", "abort", "other:1");
    assert.equal(await lock.acquire({ wait: 1_000, lease: 5_000 }), true);
    await lock.release();
  });

  it("an abort racing the grant gives the hold back; an aborted signal fails at once", async () => {
    await using locks = new Client(redis);
    const lock = locks.lock("race");
    const controller = new AbortController();
    controller.abort();
    await assert.rejects(lock.acquire({ signal: controller.signal }), { name: "AbortError" });
    // Granted at once, aborted before the reply is read: given back.
    const racing = new AbortController();
    const taking = lock.acquire({ wait: 1_000, signal: racing.signal });
    racing.abort();
    await assert.rejects(taking, { name: "AbortError" });
    // Given back in the background once the grant's reply is read.
    for (const deadline = Date.now() + 10_000; (await redis.exists("race")) !== 0 && Date.now() < deadline; ) {
      await sleep(10);
    }
    assert.equal(await redis.exists("race"), 0);
    assert.equal(lock.held, false);
  });

  it("a read-write writer waits for the last reader, a multi-lock for every hold", async () => {
    await using locks = new Client(redis);
    await redis.call("RWLOCK.READ", "rwwait", "other:1", "10000");
    await redis.call("LOCK.ACQUIRE", "mwait", "other:1", "10000");
    setTimeout(() => void redis.call("RWLOCK.UNLOCK", "rwwait", "other:1", "READ"), 300);
    setTimeout(() => void redis.call("LOCK.UNLOCK", "mwait", "other:1"), 300);
    const [writer, multi] = await Promise.all([
      locks.readWriteLock("rwwait").writeLock().hold({ wait: 5_000, lease: 5_000 }),
      locks.multiLock([["LOCK", "mwait"], ["LOCK", "mwait2"]]).hold({ wait: 5_000, lease: 5_000 }),
    ]);
    assert.equal(await redis.hget("rwwait", "mode"), "write");
    assert.equal(await redis.exists("mwait", "mwait2"), 2);
    await writer.release();
    await multi.release();
  });

  it("a wait tries once on the application's connection first; one while another of the Client waits on that lock does not", async () => {
    await using locks = new Client(redis);
    await redis.call("LOCK.ACQUIRE", "line", "other:1", "10000");
    await redis.call("CONFIG", "RESETSTAT");
    const first = locks.lock("line");
    const firstWait = first.hold({ wait: 10_000, lease: 5_000 });
    await waitBlocked(redis, 1);
    // Its try (refused), then its BLOCK.
    assert.match(await redis.info("commandstats"), /cmdstat_lock\.acquire:calls=2,/);
    await redis.call("CONFIG", "RESETSTAT");
    const second = locks.lock("line");
    const secondWait = second.hold({ wait: 10_000, lease: 5_000 });
    await waitBlocked(redis, 2);
    assert.match(await redis.info("commandstats"), /cmdstat_lock\.acquire:calls=1,/, "the BLOCK alone");
    await redis.call("LOCK.UNLOCK", "line", "other:1");
    await (await firstWait).release();
    await (await secondWait).release();
    assert.equal(await redis.exists("line"), 0);
  });

  it("uncontended acquisitions without a wait limit need no connection of their own; concurrent ones leave together", async () => {
    await using locks = new Client(redis);
    const handles = Array.from({ length: 8 }, (_, i) => locks.lock(`free:${i}`));
    await Promise.all(handles.map(async (h) => (await h.hold({ lease: 5_000 })).release())); // INFO learned
    await redis.call("CONFIG", "RESETSTAT");
    for (let round = 0; round < 3; round++) {
      await Promise.all(handles.map(async (h) => (await h.hold({ lease: 5_000 })).release()));
    }
    const stats = await redis.info("commandstats");
    assert.match(stats, /cmdstat_lock\.acquire:calls=24,/);
    assert.match(stats, /cmdstat_lock\.unlock:calls=24,/);
    // RESETSTAT zeroes total_connections_received too: no connection since.
    assert.equal(await infoField(redis, "stats", "total_connections_received"), "0");
    // 48 sends (acquisitions; releases) from 8 workers at once, each
    // tick's in 3 writes (the first at once, then at most `MAX_BATCH`, 4,
    // per write): 18 reads when no write is split, besides this test's
    // own few; one per send (over 48) without. The bound leaves a loaded
    // machine's split writes room.
    const reads = Number(await infoField(redis, "stats", "total_reads_processed"));
    assert.ok(reads < 40, `${reads} reads for 48 sends`);
  });
});

/** Waits until the server has `n` blocked clients. */
async function waitBlocked(redis: Redis, n: number): Promise<void> {
  const deadline = Date.now() + 10_000;
  while ((await infoField(redis, "clients", "blocked_clients")) !== String(n)) {
    assert.ok(Date.now() < deadline, `blocked_clients never became ${n}`);
    await sleep(10);
  }
}
