/**
 * The replica acknowledgement's contract: what a client object learns of a
 * master (the replicas only ever rise), what each acquisition pipelines
 * after it, and on real servers: a master that lost the replica it was seen
 * with fails acquisitions (the paused-master failover in miniature), a
 * master refusing writes without replicas too, and an uncontended cycle is
 * two round trips.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { createConnection, createServer, type Socket } from "node:net";
import Redis from "ioredis";
import { Client, NotSynced } from "../src/index";
import { syncOf } from "../src/options";
import { commandsOf, extraMs, INFO, Masters, REFRESH_MS } from "../src/sync";
import { acknowledged, infoField, Server, waitUntil } from "./support";

const MASTER = "127.0.0.1:6379";

function info(replicas: number, aof: boolean): string {
  return `# Replication\r\nrole:master\r\nconnected_slaves:${replicas}\r\n# Persistence\r\naof_enabled:${aof ? 1 : 0}\r\n`;
}

const DEFAULT = syncOf(undefined);

describe("what is learned of a master", () => {
  it("INFO is asked before the first acquisition, then rides in the pipeline every 5 s", () => {
    const masters = new Masters();
    assert.equal(masters.plan(MASTER, DEFAULT, 0), null, "INFO first");
    masters.learn(MASTER, info(2, false), 0);
    const checks = masters.plan(MASTER, DEFAULT, 0);
    assert.ok(checks !== null);
    assert.deepEqual(commandsOf(checks), [["WAIT", 2, 1000]]);
    assert.equal(extraMs(checks), 1000);
    assert.deepEqual(commandsOf(masters.plan(MASTER, DEFAULT, REFRESH_MS) ?? assert.fail()), [["WAIT", 2, 1000], INFO]);
    assert.deepEqual(commandsOf(masters.plan(MASTER, DEFAULT, REFRESH_MS) ?? assert.fail()), [["WAIT", 2, 1000]], "asked already");
  });

  it("INFO only raises what is expected; a later 0 does not lower it", () => {
    const masters = new Masters();
    masters.learn(MASTER, info(1, false), 0);
    masters.learn(MASTER, info(2, false), 0);
    masters.learn(MASTER, info(0, false), 0); // a paused or demoted master says 0
    assert.equal(masters.expected(MASTER), 2);
    const refresh = masters.plan(MASTER, DEFAULT, REFRESH_MS) ?? assert.fail();
    assert.equal(masters.read(refresh, [{ error: null, reply: 2 }, { error: null, reply: info(0, true) }], MASTER), null);
    assert.equal(masters.expected(MASTER), 2, "through the pipeline's INFO too");
    assert.deepEqual(commandsOf(masters.plan(MASTER, DEFAULT, REFRESH_MS) ?? assert.fail()),
      [["WAIT", 2, 1000], ["WAITAOF", 1, 0, 1000]], "the AOF as it last said");
    assert.equal(masters.plan("127.0.0.1:6380", DEFAULT, 0), null, "each master apart");
  });

  it("an explicit count wins and needs no INFO", () => {
    const masters = new Masters();
    masters.learn(MASTER, info(3, false), 0);
    assert.deepEqual(commandsOf(masters.plan(MASTER, syncOf({ replicas: 1 }), 0) ?? assert.fail()), [["WAIT", 1, 1000]]);
    const fresh = new Masters();
    assert.deepEqual(commandsOf(fresh.plan(MASTER, syncOf({ replicas: 0, aof: "off" }), REFRESH_MS) ?? assert.fail()), []);
    assert.deepEqual(commandsOf(fresh.plan(MASTER, syncOf({ enabled: false }), 0) ?? assert.fail()), []);
    assert.throws(() => syncOf({ replicas: -1 }), RangeError);
    assert.throws(() => syncOf({ aof: "sometimes" as "auto" }), RangeError);
  });

  it("the AOF: auto, required or off; a master without WAITAOF is learned", () => {
    const masters = new Masters();
    masters.learn(MASTER, info(0, true), 0);
    const waitAof = ["WAITAOF", 1, 0, 1000];
    assert.deepEqual(commandsOf(masters.plan(MASTER, DEFAULT, 0) ?? assert.fail()), [waitAof]);
    assert.deepEqual(commandsOf(masters.plan(MASTER, syncOf({ aof: false }), 0) ?? assert.fail()), []);
    const required = syncOf({ replicas: 0, aof: "required" });
    const fresh = new Masters();
    const checks = fresh.plan(MASTER, required, 0) ?? assert.fail();
    assert.deepEqual(commandsOf(checks), [waitAof], "required: also where no AOF was seen");
    const off = new Error("ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.");
    assert.match(fresh.read(checks, [{ error: off }], MASTER) ?? "", /^WAITAOF/);
    assert.match(fresh.read(checks, [{ error: null, reply: [0, 0] }], MASTER) ?? "", /^WAITAOF/);
    assert.equal(fresh.read(checks, [{ error: null, reply: [1, 0] }], MASTER), null);

    const unknown = new Error("ERR unknown command 'WAITAOF', with args beginning with:");
    const auto = masters.plan(MASTER, DEFAULT, 0) ?? assert.fail();
    assert.equal(masters.read(auto, [{ error: unknown }], MASTER), null, "before 7.2: WAIT alone");
    assert.deepEqual(commandsOf(masters.plan(MASTER, DEFAULT, 0) ?? assert.fail()), [], "not sent again");
    const nothing = masters.plan(MASTER, syncOf({ aof: "required" }), 0) ?? assert.fail();
    assert.deepEqual(commandsOf(nothing), []);
    assert.match(masters.read(nothing, [], MASTER) ?? "", /no WAITAOF/);
  });

  it("the replies decide", () => {
    const masters = new Masters();
    masters.learn(MASTER, info(1, false), 0);
    const checks = masters.plan(MASTER, DEFAULT, 0) ?? assert.fail();
    assert.equal(masters.read(checks, [{ error: null, reply: 1 }], MASTER), null);
    assert.equal(masters.read(checks, [{ error: null, reply: 0 }], MASTER), "WAIT 1 replied 0");
  });
});

/**
 * A TCP proxy counting round trips: one begins each time the client sends
 * after the server last spoke (or first), however many commands (a
 * pipeline) and reads that send takes.
 */
async function turnProxy(targetPort: number): Promise<{ port: number; turns: () => number; close: () => void }> {
  let turns = 0;
  const sockets = new Set<Socket>();
  const server = createServer((client) => {
    const upstream = createConnection({ host: "127.0.0.1", port: targetPort });
    sockets.add(client).add(upstream);
    let answered = true;
    client.on("data", (data) => {
      if (answered) {
        answered = false;
        turns += 1;
      }
      upstream.write(data);
    });
    upstream.on("data", (data) => {
      answered = true; // before passing it on: the client's next send comes after it
      client.write(data);
    });
    const end = (): void => {
      client.destroy();
      upstream.destroy();
    };
    client.on("close", end).on("error", end);
    upstream.on("close", end).on("error", end);
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  const address = server.address();
  const port = typeof address === "object" && address !== null ? address.port : 0;
  return {
    port,
    turns: () => turns,
    close: () => {
      for (const s of sockets) s.destroy();
      server.close();
    },
  };
}

describe("replica acknowledgement on real servers", () => {
  it("a master that lost the replica it was seen with fails acquisitions; replicas: 0 succeeds", async () => {
    const master = await Server.start(["--repl-diskless-sync-delay", "0"]);
    const replica = await Server.start(["--replicaof", "127.0.0.1", String(master.port)]);
    const redis = master.client();
    const onReplica = replica.client();
    try {
      await waitUntil("the replica to sync", async () =>
        (await infoField(redis, "replication", "connected_slaves")) === "1" &&
        (await infoField(onReplica, "replication", "master_link_status")) === "up" &&
        (await acknowledged(redis)), 30_000);
      await using locks = new Client(redis);
      const lock = locks.lock("known");
      assert.equal(await lock.acquire({ wait: 0, lease: 10_000 }), true);
      assert.equal(await onReplica.exists("known"), 1, "on the replica");
      await lock.release();

      // Gone: the master says connected_slaves:0, as a paused master does until demoted.
      await onReplica.call("REPLICAOF", "NO", "ONE");
      await waitUntil("the master saw it go", async () => (await infoField(redis, "replication", "connected_slaves")) === "0", 30_000);
      await assert.rejects(lock.acquire({ wait: 0, lease: 10_000 }), (e: Error) => e instanceof NotSynced && /WAIT 1 replied 0/.test(e.message));
      assert.equal(await redis.exists("known"), 0, "released again");
      assert.equal(lock.held, false);
      await assert.rejects(locks.readWriteLock("known-rw").writeLock().acquire({ wait: 1_000, lease: 10_000 }), NotSynced);
      assert.equal(await redis.exists("known-rw"), 0);
      // A semaphore's acquisition takes the same path: its permits given back.
      await redis.set("known-sem", "2");
      await assert.rejects(locks.semaphore("known-sem").acquire({ permits: 2, wait: 0 }), (e: Error) => e instanceof NotSynced && /WAIT 1 replied 0/.test(e.message));
      assert.equal(await redis.get("known-sem"), "2", "given back");
      // So does a permit semaphore's: its ids released.
      await redis.call("PERMIT.TRYSETPERMITS", "known-permit", "2");
      await assert.rejects(locks.permitExpirableSemaphore("known-permit").acquire({ permits: 2, lease: -1, wait: 0 }), (e: Error) => e instanceof NotSynced && /WAIT 1 replied 0/.test(e.message));
      assert.equal(await redis.call("PERMIT.AVAILABLE", "known-permit"), 2, "released");
      assert.equal(await redis.exists("{known-permit}:timeout"), 0);

      await using alone = new Client(redis, { sync: { replicas: 0 } });
      const quick = alone.lock("known");
      assert.equal(await quick.acquire({ wait: 0, lease: 10_000 }), true, "no replica expected");
      await quick.release();
    } finally {
      onReplica.disconnect();
      redis.disconnect();
      await replica.stop();
      await master.stop();
    }
  });

  it("min-replicas-to-write 1 without a replica: NotSynced, nothing written", async () => {
    const master = await Server.start(["--min-replicas-to-write", "1"]);
    const redis = master.client();
    try {
      await using locks = new Client(redis);
      await assert.rejects(locks.lock("refused").acquire({ wait: 0, lease: 10_000 }),
        (e: Error) => e instanceof NotSynced && /NOREPLICAS/.test(e.message));
      await assert.rejects(locks.fairLock("refused-fair").acquire({ wait: 0, lease: 10_000 }), NotSynced);
      await assert.rejects(locks.semaphore("refused-sem").acquire({ wait: 0 }), NotSynced);
      await assert.rejects(locks.permitExpirableSemaphore("refused-permit").acquire({ lease: -1, wait: 0 }), NotSynced);
      assert.equal(await redis.dbsize(), 0, "nothing written");
    } finally {
      redis.disconnect();
      await master.stop();
    }
  });

  it("an uncontended acquire-release cycle is two round trips of one command each, with no INFO, no WAIT and no DEL (a lock's); a semaphore's two round trips", async () => {
    const server = await Server.start();
    const proxy = await turnProxy(server.port);
    const direct = server.client();
    const redis = new Redis({ host: "127.0.0.1", port: proxy.port, commandTimeout: 10_000 });
    try {
      await using locks = new Client(redis);
      const lock = locks.lock("cycle");
      assert.equal(await lock.acquire({ wait: 0, lease: 10_000 }), true);
      await lock.release();
      await direct.call("CONFIG", "RESETSTAT");
      const before = proxy.turns();
      for (let i = 0; i < 3; i++) {
        assert.equal(await lock.acquire({ wait: 0, lease: 10_000 }), true);
        await lock.release();
      }
      assert.equal(proxy.turns() - before, 6, "two round trips per cycle");
      const stats = await direct.info("commandstats");
      assert.doesNotMatch(stats, /cmdstat_info:/, "no INFO in the cycles");
      assert.doesNotMatch(stats, /cmdstat_wait:/);
      assert.match(stats, /cmdstat_lock\.acquire:calls=3,/);
      assert.match(stats, /cmdstat_lock\.unlock:calls=3,/);
      // Two commands per cycle, nothing else: HELD writes no latch to delete.
      const calls = [...stats.matchAll(/^cmdstat_([^:]+):calls=(\d+),/gm)]
        .filter((m) => m[1] !== "config|resetstat") // this test's own
        .reduce((sum, m) => sum + Number(m[2]), 0);
      assert.equal(calls, 6, stats);
      assert.doesNotMatch(stats, /cmdstat_del:/);
      assert.deepEqual(await direct.keys("*"), [], "no latch left");

      // A semaphore's cycle is the same two: the acquisition, then the release and its DEL.
      await direct.call("SEMAPHORE.RELEASE", "{cycle}:sem", "1");
      const semaphore = locks.semaphore("{cycle}:sem");
      await direct.call("CONFIG", "RESETSTAT");
      const semBefore = proxy.turns();
      for (let i = 0; i < 3; i++) {
        assert.equal(await semaphore.acquire({ wait: 0 }), true);
        await semaphore.release();
      }
      assert.equal(proxy.turns() - semBefore, 6, "two round trips per semaphore cycle");
      const semStats = await direct.info("commandstats");
      assert.doesNotMatch(semStats, /cmdstat_wait:/);
      assert.match(semStats, /cmdstat_semaphore\.acquire:calls=3,/);
      assert.match(semStats, /cmdstat_semaphore\.release:calls=3,/);
      assert.match(semStats, /cmdstat_del:calls=3,/);
    } finally {
      redis.disconnect();
      direct.disconnect();
      proxy.close();
      await server.stop();
    }
  });
});
