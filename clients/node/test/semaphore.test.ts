/**
 * The semaphore (`SEMAPHORE.*`): a wait served by another connection's
 * release, never more permits in use than the count under concurrent
 * workers, a wait that runs out or is aborted leaving nothing, and lost
 * replies (an acquisition's, a release's) through a proxy that loses them
 * for real: permits taken or given back once.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { Client, NotAcquired } from "../src/index";
import { throughProxy } from "./proxy";
import { contend, infoField, suiteServer, waitUntil, withClients } from "./support";

describe("semaphore", () => {
  const suite = suiteServer();

  /** Nothing parked on the server: no blocked client, no waiter listed. */
  async function nothingWaits(): Promise<void> {
    await waitUntil("no blocked client", async () => (await infoField(suite.redis, "clients", "blocked_clients")) === "0", 10_000);
    assert.deepEqual(await suite.redis.call("LOCK.WAITING"), []);
  }

  it("a wait is served by another connection's release, in one BLOCK; the Permits give them back", async () => {
    await using locks = new Client(suite.redis);
    const semaphore = locks.semaphore("sem:served");
    assert.equal(await semaphore.trySetPermits(1), true);
    await suite.redis.call("SEMAPHORE.ACQUIRE", "sem:served", "1");
    let released = Infinity;
    const waiting = semaphore.hold({ permits: 2, wait: 30_000 });
    await waitUntil("the waiter parked", async () => (await infoField(suite.redis, "clients", "blocked_clients")) === "1");
    const listed = (await suite.redis.call("LOCK.WAITING")) as unknown[][];
    assert.equal(listed.length, 1);
    assert.ok(listed[0]!.includes("semaphore"), JSON.stringify(listed));
    released = performance.now();
    await suite.redis.call("SEMAPHORE.RELEASE", "sem:served", "2"); // 2 free: the waiter's 2
    const permits = await waiting;
    assert.ok(performance.now() >= released, "served before the release");
    assert.equal(permits.permits, 2);
    assert.equal(await semaphore.availablePermits(), 0);
    await permits.release();
    await permits.release(); // once
    assert.equal(await semaphore.availablePermits(), 2);
    await nothingWaits();
  });

  it("never more permits in use than the count: six workers on three client objects, 1 or 2 permits each", async () => {
    const count = 2;
    await withClients(suite.server, 3, async (clients) => {
      await clients[0]!.semaphore("sem:guard").trySetPermits(count);
      const { violations, cycles } = await contend(clients, count, 15, (client, permits, body) => client.semaphore("sem:guard").withPermits(body, { permits }));
      assert.equal(violations, 0);
      assert.equal(cycles, 90);
      assert.equal(await clients[1]!.semaphore("sem:guard").availablePermits(), count);
      await nothingWaits();
    });
  });

  it("a wait that runs out resolves false (hold: NotAcquired) and leaves nothing", async () => {
    await using locks = new Client(suite.redis);
    const semaphore = locks.semaphore("sem:out");
    assert.equal(await semaphore.trySetPermits(1), true);
    const started = performance.now();
    assert.equal(await semaphore.acquire({ permits: 2, wait: 400 }), false);
    assert.ok(performance.now() - started >= 350);
    await assert.rejects(semaphore.hold({ permits: 2, wait: 100 }), NotAcquired);
    assert.equal(await semaphore.availablePermits(), 1);
    assert.deepEqual(await suite.redis.keys("redisson_lock_request_latch:*"), [], "a refusal records no latch");
    await nothingWaits();
  });

  it("an abort ends the server-side wait: rejects with the reason, no waiter, nothing taken", async () => {
    await using locks = new Client(suite.redis);
    const semaphore = locks.semaphore("sem:abort");
    const controller = new AbortController();
    const waiting = semaphore.acquire({ signal: controller.signal }); // without limit
    await waitUntil("the waiter parked", async () => (await infoField(suite.redis, "clients", "blocked_clients")) === "1");
    controller.abort(new Error("shutting down"));
    await assert.rejects(waiting, /shutting down/);
    await nothingWaits();
    // The permit given now is nobody's: the aborted wait took nothing.
    await semaphore.release();
    assert.equal(await semaphore.availablePermits(), 1);
    await assert.rejects(semaphore.acquire({ signal: AbortSignal.abort() }), { name: "AbortError" });
    assert.equal(await semaphore.availablePermits(), 1);
  });

  // Warmed: the dedicated connection's CLIENT ID answered before, so
  // CLIENT UNBLOCK is tried (it finds no wait: served) before the
  // connection is closed. Cold: the proxy withholds the CLIENT ID's reply
  // too, and the connection is closed without it.
  for (const warm of [true, false]) {
    it(`an abort after a grant whose reply never came (${warm ? "warm" : "cold"}): the waiting connection closed, its latch says granted, the permits given back`, async () => {
      const name = `sem:abort-granted:${warm ? "warm" : "cold"}`;
      await throughProxy(suite.server, "SEMAPHORE.ACQUIRE", name, async (locks, proxy) => {
        if (warm) {
          assert.equal(await locks.semaphore(`${name}:warm`).acquire({ wait: 50 }), false);
        }
        const semaphore = locks.semaphore(name);
        const controller = new AbortController();
        const waiting = semaphore.acquire({ permits: 2, signal: controller.signal });
        await waitUntil("the waiter parked", async () => (await infoField(suite.redis, "clients", "blocked_clients")) === "1");
        await suite.redis.call("SEMAPHORE.RELEASE", name, "2"); // served: its reply withheld by the proxy
        await waitUntil("the grant's reply withheld", () => proxy.fired);
        assert.equal(await suite.redis.get(name), "0", "granted on the server");
        controller.abort(new Error("shutting down"));
        await assert.rejects(waiting, /shutting down/);
        assert.equal(await suite.redis.get(name), "2", "the grant given back");
        await nothingWaits();
      }, ["BLOCK"], true);
    });
  }

  for (const waiting of [false, true]) {
    const name = `sem:lost${waiting ? ":wait" : ""}`;
    it(`${name}: the acquisition's reply lost once, its permits taken once`, async () => {
      // A wait's reply lost is its BLOCK's, on a dedicated connection (its
      // try, on the application's connection, was refused).
      await throughProxy(suite.server, "SEMAPHORE.ACQUIRE", name, async (locks, proxy) => {
        // A warm-up on another semaphore: the dedicated connection's CLIENT
        // ID is answered before the acquisition whose reply is lost.
        const warm = locks.semaphore(`${name}:warm`);
        await warm.release();
        assert.equal(await warm.acquire({ wait: 1_000 }), true);
        const semaphore = locks.semaphore(name);
        if (waiting) {
          await suite.redis.call("SEMAPHORE.TRYSETPERMITS", name, "1");
          setTimeout(() => void suite.redis.call("SEMAPHORE.RELEASE", name, "2"), 300);
        } else {
          await suite.redis.call("SEMAPHORE.TRYSETPERMITS", name, "3");
        }
        await suite.redis.call("CONFIG", "RESETSTAT");
        assert.equal(await semaphore.acquire({ permits: 2, wait: waiting ? 10_000 : 0 }), true);
        assert.ok(proxy.fired, "the proxy lost no reply");
        assert.equal(await suite.redis.get(name), "1", "taken once");
        const stats = await suite.redis.info("commandstats");
        // Resent on a new dedicated connection (a wait's after its refused
        // try), with a PEXPIRE of its latch for the replica check's WAIT.
        assert.match(stats, new RegExp(`cmdstat_semaphore\\.acquire:calls=${waiting ? 3 : 2},`), "the lost send and its resend");
        if (waiting) {
          assert.match(stats, /cmdstat_pexpire:calls=1,/);
        }
        await semaphore.release(2);
        assert.equal(await suite.redis.get(name), "3");
        const latches = await suite.redis.keys(`redisson_lock_request_latch:{${name}}:*`);
        if (waiting) {
          assert.deepEqual(latches, [], "the release's DEL took the latch");
        } else {
          // A lost try's bytes may still reach the server after its resend:
          // its latch is left to expire, answering that late send.
          assert.equal(latches.length, 1, String(latches));
          assert.ok((await suite.redis.pttl(latches[0]!)) > 0, "left to expire");
        }
      }, waiting ? ["BLOCK"] : []);
    });
  }

  it("a release's reply lost: resent with its request id, the permits given back once; its latch is left to expire", async () => {
    const name = "sem:relost";
    await throughProxy(suite.server, "SEMAPHORE.RELEASE", name, async (locks, proxy) => {
      const semaphore = locks.semaphore(name);
      await suite.redis.call("CONFIG", "RESETSTAT");
      await semaphore.release(2);
      assert.ok(proxy.fired, "the proxy lost the release's reply");
      assert.match(await suite.redis.info("commandstats"), /cmdstat_semaphore\.release:calls=2,/, "the release and its resend");
      assert.equal(await suite.redis.get(name), "2", "given back once");
      const latches = await suite.redis.keys(`redisson_unlock_latch:{${name}}:*`);
      assert.equal(latches.length, 1, "the latch outlives its reply");
      await semaphore.release();
      assert.equal(await suite.redis.get(name), "3");
      // The lost release's bytes may still reach the server after its
      // resend: its latch is left to expire (not in the next release's
      // DEL), answering that late send; the next release's own stays for
      // the release after it.
      const next = await suite.redis.keys(`redisson_unlock_latch:{${name}}:*`);
      assert.equal(next.length, 2, String(next));
      assert.ok(next.includes(latches[0]!));
      assert.ok((await suite.redis.pttl(latches[0]!)) > 0, "left to expire");
    });
  });

  it("an addPermits' reply lost is raised and never sent again (no request id: sent on a connection that resends nothing)", async () => {
    await throughProxy(suite.server, "SEMAPHORE.ADDPERMITS", "sem:addlost", async (locks, proxy) => {
      const semaphore = locks.semaphore("sem:addlost");
      await suite.redis.call("CONFIG", "RESETSTAT");
      await assert.rejects(semaphore.addPermits(2));
      assert.ok(proxy.fired, "the proxy lost the reply");
      assert.match(await suite.redis.info("commandstats"), /cmdstat_semaphore\.addpermits:calls=1,/);
      assert.equal(await suite.redis.get("sem:addlost"), "2", "added once");
    });
  });

  it("an object that only acquires keeps the latest 64 latches for its next release's DEL; the older ones are left to expire", async () => {
    await using locks = new Client(suite.redis);
    const semaphore = locks.semaphore("sem:taker");
    assert.equal(await semaphore.trySetPermits(70), true);
    for (let i = 0; i < 70; i++) {
      assert.equal(await semaphore.acquire({ wait: 0 }), true);
    }
    assert.equal((await suite.redis.keys("redisson_lock_request_latch:{sem:taker}:*")).length, 70);
    await semaphore.release();
    const left = await suite.redis.keys("redisson_lock_request_latch:{sem:taker}:*");
    assert.equal(left.length, 70 - 64, "the DEL took the latest 64");
    const pttl = await suite.redis.pttl(left[0]!);
    assert.ok(pttl > 0 && pttl <= 13_500, String(pttl));
  });

  it("trySetPermits with a TTL, addPermits (negative too), drainPermits; bad counts refused before sending", async () => {
    await using locks = new Client(suite.redis);
    const semaphore = locks.semaphore("sem:ops");
    assert.equal(await semaphore.trySetPermits(4, { ttl: 60_000 }), true);
    const pttl = await suite.redis.pttl("sem:ops");
    assert.ok(pttl > 0 && pttl <= 60_000, String(pttl));
    await semaphore.addPermits(-5);
    assert.equal(await semaphore.availablePermits(), -1);
    assert.equal(await semaphore.acquire({ wait: 0 }), false);
    await semaphore.addPermits(3);
    assert.equal(await semaphore.drainPermits(), 2);
    assert.equal(await semaphore.availablePermits(), 0);
    assert.throws(() => locks.semaphore(""), /non-empty/);
    await assert.rejects(semaphore.acquire({ permits: 0 }), RangeError);
    await assert.rejects(semaphore.release(1.5), RangeError);
    await assert.rejects(semaphore.addPermits(Number.NaN), RangeError);
  });
});
