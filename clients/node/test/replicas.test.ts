/** Replica acknowledgement: a master with a replica; a frozen replica fails the acquisition (NotSynced). */

import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { Redis } from "ioredis";
import { Client, NotSynced } from "../src/index";
import { acknowledged, infoField, Server, waitUntil } from "./support";

describe("replica sync", () => {
  let master: Server;
  let replica: Server;
  let redis: Redis;

  before(async () => {
    master = await Server.start();
    replica = await Server.start(["--replicaof", "127.0.0.1", String(master.port)]);
    redis = master.client();
    const replicaClient = replica.client();
    await waitUntil("the replica to sync", async () =>
      (await infoField(redis, "replication", "connected_slaves")) === "1" &&
      (await infoField(replicaClient, "replication", "master_link_status")) === "up" &&
      (await acknowledged(redis)));
  });
  after(async () => {
    await replica.stop();
    await master.stop();
  });

  it("an acquisition waits for the replica's acknowledgement (WAIT on its own connection)", async () => {
    await using locks = new Client(redis);
    await redis.call("CONFIG", "RESETSTAT");
    const lock = locks.lock("synced");
    assert.equal(await lock.acquire({ wait: 0, lease: 10_000 }), true);
    assert.match(await redis.info("commandstats"), /cmdstat_wait:calls=1,/);
    assert.equal(await replica.client().hget("synced", lock.owner), "1");
    await lock.release();
  });

  it("a frozen replica: NotSynced after the sync timeout, the hold released; sync off does not wait", async () => {
    await using locks = new Client(redis, { sync: { timeout: 500 } });
    const lock = locks.lock("frozen");
    replica.pause();
    try {
      const started = performance.now();
      await assert.rejects(lock.acquire({ wait: 0, lease: 10_000 }), NotSynced);
      const elapsed = performance.now() - started;
      assert.ok(elapsed >= 450 && elapsed < 3_000, `${elapsed}`);
      assert.equal(await redis.exists("frozen"), 0);
      assert.equal(lock.held, false);
      await using unsynced = new Client(redis, { sync: { enabled: false } });
      const quick = unsynced.lock("frozen");
      assert.equal(await quick.acquire({ wait: 0, lease: 10_000 }), true);
      await quick.release();
    } finally {
      replica.resume();
    }
  });

  it("an AOF master: WAITAOF where the server has it (7.2+), WAIT alone before", async () => {
    await redis.call("CONFIG", "SET", "appendonly", "yes");
    try {
      await waitUntil("the AOF rewrite", async () => (await infoField(redis, "persistence", "aof_rewrite_in_progress")) === "0"
        && (await infoField(redis, "persistence", "aof_enabled")) === "1");
      await using locks = new Client(redis);
      const lock = locks.lock("aof");
      assert.equal(await lock.acquire({ wait: 0, lease: 10_000 }), true);
      await lock.release();
    } finally {
      await redis.call("CONFIG", "SET", "appendonly", "no");
    }
  });
});
