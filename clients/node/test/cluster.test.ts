/**
 * A Redis Cluster of three masters: every command goes to the master of the
 * lock name's slot, waits work there, a multi-lock of one hash tag, and a
 * `MOVED` (the slot reassigned) followed.
 */

import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import calculateSlot from "cluster-key-slot";
import { Cluster, type Redis } from "ioredis";
import { Client } from "../src/index";
import { startCluster, type Server } from "./support";

describe("cluster", () => {
  let nodes: Server[];
  let cluster: Cluster;

  before(async () => {
    nodes = await startCluster();
    cluster = new Cluster([{ host: "127.0.0.1", port: nodes[0]!.port }], { redisOptions: { commandTimeout: 5_000 } });
    cluster.on("error", () => undefined);
  });
  after(async () => {
    cluster?.disconnect();
    await Promise.all(nodes.map((n) => n.stop()));
  });

  /** The test's own connection to the master serving `key`'s slot. */
  async function ownerOf(key: string): Promise<Redis> {
    const slot = calculateSlot(key);
    for (const node of nodes) {
      const client = node.client();
      const ranges = (await client.call("CLUSTER", "SLOTS")) as [number, number, [string, number]][];
      const range = ranges.find(([first, last]) => slot >= first && slot <= last)!;
      if (range[2][1] === node.port) {
        return client;
      }
    }
    throw new Error(`no node serves ${key}`);
  }

  /**
   * Hands the empty `slot` from `from` to `target` as a reshard does:
   * IMPORTING on the target and MIGRATING on the owner first, so that the
   * target's `SETSLOT NODE` raises its config epoch above every other
   * node's. A bare `SETSLOT NODE` on each node in turn can lose a race on a
   * busy machine: gossip from a node not yet told still claims the slot with
   * a higher epoch and takes it back (a failed run: MOVED from both sides).
   * Returns once every node says the target serves it.
   */
  async function moveSlot(slot: number, from: Redis, target: Server): Promise<void> {
    const fromId = String(await from.call("CLUSTER", "MYID"));
    const targetId = String(await target.client().call("CLUSTER", "MYID"));
    await target.client().call("CLUSTER", "SETSLOT", slot, "IMPORTING", fromId);
    await from.call("CLUSTER", "SETSLOT", slot, "MIGRATING", targetId);
    await target.client().call("CLUSTER", "SETSLOT", slot, "NODE", targetId);
    await from.call("CLUSTER", "SETSLOT", slot, "NODE", targetId);
    for (const node of nodes) {
      if (node.port !== target.port && node.port !== from.options.port) {
        await node.client().call("CLUSTER", "SETSLOT", slot, "NODE", targetId);
      }
    }
    const deadline = Date.now() + 30_000;
    for (;;) {
      const views = await Promise.all(
        nodes.map(async (node) => {
          const ranges = (await node.client().call("CLUSTER", "SLOTS")) as [number, number, [string, number]][];
          return ranges.find(([first, last]) => slot >= first && slot <= last)?.[2][1];
        }),
      );
      if (views.every((port) => port === target.port)) {
        return;
      }
      assert.ok(Date.now() < deadline, `the nodes still disagree on slot ${slot}: ${views.join(", ")}`);
      await new Promise((resolve) => setTimeout(resolve, 50));
    }
  }

  it("locks on names of every master, each on its slot's master", async () => {
    await using locks = new Client(cluster);
    const names = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"];
    const ports = new Set<number>();
    for (const name of names) {
      const lock = locks.lock(name);
      const hold = await lock.hold({ wait: 0 });
      const master = await ownerOf(name);
      ports.add(master.options.port!);
      assert.equal(await master.hget(name, lock.owner), "1", name);
      await hold.release();
      assert.equal(await master.exists(name), 0);
    }
    assert.equal(ports.size, 3, "the names cover all three masters");
  });

  it("a wait served on the slot's master; a fenced read-write lock; a multi-lock of one hash tag", async () => {
    await using locks = new Client(cluster);
    const master = await ownerOf("cwait");
    await master.call("LOCK.ACQUIRE", "cwait", "other:1", "10000");
    setTimeout(() => void master.call("LOCK.UNLOCK", "cwait", "other:1"), 300);
    const hold = await locks.lock("cwait").hold({ wait: 5_000, lease: 5_000 });
    await hold.release();

    const write = await locks.readWriteLock("crw", { fenced: true }).writeLock().hold({ wait: 0 });
    assert.ok(write.token !== null);
    assert.equal(await (await ownerOf("crw")).hget("crw", "mode"), "write");
    await write.release();

    const multi = locks.multiLock([["LOCK", "{acct}:1"], ["WRITE", "{acct}:2"]]);
    await multi.acquire({ wait: 0, lease: 5_000 });
    assert.equal(await (await ownerOf("{acct}")).exists("{acct}:1", "{acct}:2"), 2);
    await multi.release();
  });

  it("a semaphore and a latch on names of other masters: each command, and each wait, on the slot's master", async () => {
    await using locks = new Client(cluster);
    const semaphore = locks.semaphore("csem");
    assert.equal(await semaphore.trySetPermits(1), true);
    assert.equal(await semaphore.acquire({ wait: 0 }), true);
    const onMaster = await ownerOf("csem");
    setTimeout(() => void onMaster.call("SEMAPHORE.RELEASE", "csem", "2"), 300);
    assert.equal(await semaphore.acquire({ permits: 2, wait: 5_000 }), true);
    await semaphore.release(3);
    assert.equal(await onMaster.get("csem"), "3");
    assert.equal(await semaphore.drainPermits(), 3);

    const latch = locks.countDownLatch("clatch");
    assert.notEqual((await ownerOf("clatch")).options.port, onMaster.options.port, "another master");
    assert.equal(await latch.trySetCount(1), true);
    const waiting = latch.await({ wait: 5_000 });
    setTimeout(() => void latch.countDown(), 300);
    assert.equal(await waiting, true);
    assert.equal(await latch.getCount(), 0);
  });

  it("follows MOVED after the slot moved to another master", async () => {
    await using locks = new Client(cluster);
    const name = "moving";
    const lock = locks.lock(name);
    await (await lock.hold({ wait: 0 })).release(); // the slot map is known
    const from = await ownerOf(name);
    const target = nodes.find((n) => n.port !== from.options.port)!;
    // moveSlot migrates no keys, and a node holding one keeps its slot: a
    // cycle leaves none (HELD writes no latch).
    assert.deepEqual(await from.keys(`*${name}*`), [], "nothing left by the cycle");
    await moveSlot(calculateSlot(name), from, target);
    await from.call("CONFIG", "RESETSTAT");
    const hold = await lock.hold({ wait: 0 }); // MOVED from the old master, then sent to the new one
    assert.match(await from.info("commandstats"), /cmdstat_lock\.acquire:calls=0,.*rejected_calls=1/, "the old master redirected it");
    const now = await ownerOf(name);
    assert.equal(now.options.port, target.port);
    assert.equal(await now.hget(name, lock.owner), "1");
    await hold.release();
    assert.equal(await now.exists(name), 0);
  });
});
