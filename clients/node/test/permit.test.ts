/**
 * The permit-expirable semaphore (`PERMIT.*`): a wait served by another
 * connection's release, never more permits in use than the count under
 * concurrent workers, a wait served by the expiry of a holder that never releases
 * with no other call; the watchdog renewing a lease-less permit until its
 * release, and reporting it lost; an abort leaving no waiter (and giving
 * back a grant whose reply never came); a lost acquisition reply through a
 * proxy that loses it for real: the same ids, taken once; a lost release
 * reply raised.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { Client, NotAcquired, NotHeld } from "../src/index";
import { throughProxy } from "./proxy";
import { contend, infoField, suiteServer, waitUntil, withClients } from "./support";

/** How many times `command` ran since the last `CONFIG RESETSTAT`. */
function calls(stats: string, command: string): number {
  const line = stats.split(/\r?\n/).find((l) => l.startsWith(`cmdstat_${command}:`));
  return line === undefined ? 0 : Number(/calls=(\d+)/.exec(line)?.[1] ?? "0");
}

describe("permit-expirable semaphore", () => {
  const suite = suiteServer();

  /** Nothing parked on the server: no blocked client, no waiter listed. */
  async function nothingWaits(): Promise<void> {
    await waitUntil("no blocked client", async () => (await infoField(suite.redis, "clients", "blocked_clients")) === "0", 10_000);
    assert.deepEqual(await suite.redis.call("LOCK.WAITING"), []);
  }

  async function updates(): Promise<number> {
    return calls(await suite.redis.info("commandstats"), "permit.updatelease");
  }

  it("a wait is served by another connection's release, in one BLOCK; the PermitIds release them", async () => {
    await using locks = new Client(suite.redis);
    const semaphore = locks.permitExpirableSemaphore("permit:served");
    assert.equal(await semaphore.trySetPermits(2), true);
    const taken = (await suite.redis.call("PERMIT.ACQUIRE", "permit:served", "2", "-1")) as string[];
    const waiting = semaphore.hold({ permits: 2, lease: 60_000, wait: 30_000 });
    await waitUntil("the waiter parked", async () => (await infoField(suite.redis, "clients", "blocked_clients")) === "1");
    assert.equal(((await suite.redis.call("LOCK.WAITING")) as unknown[]).length, 1);
    const released = performance.now();
    assert.equal(await suite.redis.call("PERMIT.RELEASE", "permit:served", ...taken), 2);
    const permits = await waiting;
    assert.ok(performance.now() >= released, "served before the release");
    assert.equal(permits.ids.length, 2);
    assert.notDeepEqual([...permits.ids].sort(), [...taken].sort());
    const left = await semaphore.leaseTime(permits.ids[0]!);
    assert.ok(left > 50_000 && left <= 60_000, String(left));
    assert.equal(await semaphore.acquiredPermits(), 2);
    assert.equal(await semaphore.availablePermits(), 0);
    await permits.release();
    await permits.release(); // once
    assert.equal(await semaphore.availablePermits(), 2);
    assert.equal(await semaphore.getPermits(), 2);
    await nothingWaits();
  });

  it("never more permits in use than the count: six workers on three client objects, 1 or 2 permits each, leased by the watchdog", async () => {
    const count = 2;
    await withClients(suite.server, 3, async (clients) => {
      assert.equal(await clients[0]!.permitExpirableSemaphore("permit:guard").trySetPermits(count), true);
      const { violations, cycles } = await contend(clients, count, 10, (client, permits, body) =>
        client.permitExpirableSemaphore("permit:guard").withPermits(async (ids) => {
          assert.equal(ids.length, permits);
          await body();
        }, { permits }));
      assert.equal(violations, 0);
      assert.equal(cycles, 60);
      assert.equal(await clients[1]!.permitExpirableSemaphore("permit:guard").availablePermits(), count);
      assert.equal(await suite.redis.exists("{permit:guard}:timeout"), 0);
      await nothingWaits();
    });
  });

  it("a holder that never releases: its permit comes back at its expiry and serves the waiter, with no other call", async () => {
    await using locks = new Client(suite.redis);
    const semaphore = locks.permitExpirableSemaphore("permit:crashed");
    assert.equal(await semaphore.trySetPermits(1), true);
    const [crashed] = (await suite.redis.call("PERMIT.ACQUIRE", "permit:crashed", "1", "1500")) as string[];
    await suite.redis.call("CONFIG", "RESETSTAT");
    const started = performance.now();
    const ids = await semaphore.acquire({ lease: -1, wait: 30_000 });
    assert.ok(ids !== null && ids.length === 1, JSON.stringify(ids));
    assert.ok(performance.now() - started >= 1_000, "served before the expiry");
    const stats = await suite.redis.info("commandstats");
    // Its try and its wait; nothing else ran meanwhile on the server.
    assert.equal(calls(stats, "permit.acquire"), 2);
    assert.equal(stats.split(/\r?\n/).filter((l) => l.startsWith("cmdstat_permit.")).length, 1, stats);
    assert.equal(await semaphore.leaseTime(ids[0]!), -1, "never expires");
    assert.equal(await semaphore.leaseTime(crashed!), 0, "the crashed holder's is gone");
    await assert.rejects(semaphore.release(crashed!), NotHeld);
    await semaphore.release(ids);
    assert.equal(await semaphore.availablePermits(), 1);
    await nothingWaits();
  });

  it("the watchdog keeps a lease-less permit past its timeout with PERMIT.UPDATELEASE, and stops at the release", async () => {
    await using locks = new Client(suite.redis, { watchdogTimeout: 900 });
    const semaphore = locks.permitExpirableSemaphore("permit:dog");
    assert.equal(await semaphore.trySetPermits(3), true);
    await suite.redis.call("CONFIG", "RESETSTAT");
    const permits = await semaphore.hold({ permits: 2 });
    const started = performance.now();
    await waitUntil("renewed four times", async () => (await updates()) >= 8); // both ids, each time
    assert.ok(performance.now() - started > 900, "four renewals within the lease");
    for (const id of permits.ids) {
      const left = await semaphore.leaseTime(id);
      assert.ok(left > 0 && left <= 900, String(left));
    }
    assert.equal(await semaphore.acquiredPermits(), 2);
    await permits.release();
    assert.equal(permits.signal.aborted, false);
    const after = await updates();
    await sleep(1_200); // four renewal periods: none may come
    assert.equal(await updates(), after, "renewed after the release");
    assert.equal(await semaphore.availablePermits(), 3);
  });

  it("a renewal answered 0 (the permit released elsewhere) stops the watchdog and reports the ids lost", async () => {
    await using locks = new Client(suite.redis, { watchdogTimeout: 600 });
    const reported: string[][] = [];
    const semaphore = locks.permitExpirableSemaphore("permit:lost", { onLost: (ids) => reported.push([...ids]) });
    assert.equal(await semaphore.trySetPermits(1), true);
    const events: unknown[] = [];
    semaphore.on("lost", (ids) => events.push(ids));
    const permits = await semaphore.hold();
    assert.equal(await suite.redis.call("PERMIT.RELEASE", "permit:lost", ...permits.ids), 1);
    await waitUntil("reported lost", () => permits.signal.aborted);
    assert.ok(permits.signal.reason instanceof NotHeld);
    assert.deepEqual(reported, [[...permits.ids]]);
    assert.deepEqual(events, [[...permits.ids]]);
    await suite.redis.call("CONFIG", "RESETSTAT");
    await assert.rejects(permits.release(), NotHeld);
    await sleep(700); // three renewal periods: none may come
    assert.equal(await updates(), 0, "renewed after it was lost");
  });

  it("a wait that runs out resolves null (hold: NotAcquired); an abort ends the wait on the server: no waiter, nothing taken", async () => {
    await using locks = new Client(suite.redis);
    const semaphore = locks.permitExpirableSemaphore("permit:abort");
    assert.equal(await semaphore.acquire({ lease: 1_000, wait: 300 }), null);
    await assert.rejects(semaphore.hold({ lease: 1_000, wait: 0 }), NotAcquired);
    const controller = new AbortController();
    const waiting = semaphore.acquire({ lease: -1, signal: controller.signal }); // without limit
    await waitUntil("the waiter parked", async () => (await infoField(suite.redis, "clients", "blocked_clients")) === "1");
    controller.abort(new Error("shutting down"));
    await assert.rejects(waiting, /shutting down/);
    await nothingWaits();
    await semaphore.addPermits(1);
    assert.equal(await semaphore.availablePermits(), 1, "the aborted wait took nothing");
    assert.equal(await semaphore.acquiredPermits(), 0);
    await assert.rejects(semaphore.acquire({ signal: AbortSignal.abort() }), { name: "AbortError" });
    assert.equal(await semaphore.availablePermits(), 1);
  });

  it("an abort after a grant whose reply never came: its ids replayed from the latch and released", async () => {
    const name = "permit:abort-granted";
    await throughProxy(suite.server, "PERMIT.ACQUIRE", name, async (locks, proxy) => {
      // A warm-up: the dedicated connection's CLIENT ID answered before.
      assert.equal(await locks.permitExpirableSemaphore(`${name}:warm`).acquire({ lease: -1, wait: 50 }), null);
      const semaphore = locks.permitExpirableSemaphore(name);
      const controller = new AbortController();
      const waiting = semaphore.acquire({ permits: 2, lease: -1, signal: controller.signal });
      await waitUntil("the waiter parked", async () => (await infoField(suite.redis, "clients", "blocked_clients")) === "1");
      await suite.redis.call("PERMIT.ADDPERMITS", name, "2"); // served: its reply withheld by the proxy
      await waitUntil("the grant's reply withheld", () => proxy.fired);
      assert.equal(await suite.redis.call("PERMIT.ACQUIRED", name), 2, "granted on the server");
      controller.abort(new Error("shutting down"));
      await assert.rejects(waiting, /shutting down/);
      assert.equal(await suite.redis.call("PERMIT.ACQUIRED", name), 0, "the grant released");
      assert.equal(await suite.redis.call("PERMIT.AVAILABLE", name), 2);
      await nothingWaits();
    }, ["BLOCK"], true);
  });

  for (const waiting of [false, true]) {
    const name = `permit:replylost${waiting ? ":wait" : ""}`;
    it(`${name}: the acquisition's reply lost once, resent with its request id: the same ids, taken once`, async () => {
      await throughProxy(suite.server, "PERMIT.ACQUIRE", name, async (locks, proxy) => {
        // A warm-up on another semaphore: the dedicated connection's CLIENT
        // ID is answered before the acquisition whose reply is lost.
        const warm = locks.permitExpirableSemaphore(`${name}:warm`);
        await warm.addPermits(1);
        assert.notEqual(await warm.acquire({ lease: -1, wait: 1_000 }), null);
        const semaphore = locks.permitExpirableSemaphore(name);
        if (waiting) {
          await suite.redis.call("PERMIT.TRYSETPERMITS", name, "1");
          setTimeout(() => void suite.redis.call("PERMIT.ADDPERMITS", name, "2"), 300);
        } else {
          await suite.redis.call("PERMIT.TRYSETPERMITS", name, "3");
        }
        await suite.redis.call("CONFIG", "RESETSTAT");
        const ids = await semaphore.acquire({ permits: 2, lease: 60_000, wait: waiting ? 10_000 : 0 });
        assert.ok(proxy.fired, "the proxy lost no reply");
        assert.ok(ids !== null && ids.length === 2, JSON.stringify(ids));
        // Stored as Redisson stores them: 16 bytes each, the hex of which is the id.
        const held = (await suite.redis.zrangeBuffer(`{${name}}:timeout`, 0, -1)).map((id) => id.toString("hex"));
        assert.deepEqual(held.sort(), [...ids].sort(), "the resend's ids are the first send's");
        assert.equal(await semaphore.availablePermits(), 1, "taken once");
        assert.match(await suite.redis.info("commandstats"), new RegExp(`cmdstat_permit\\.acquire:calls=${waiting ? 3 : 2},`), "the lost send and its resend");
        await semaphore.release(ids);
        assert.equal(await semaphore.availablePermits(), 3);
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

  it("a release's reply lost rejects and is not sent again by the package; the ids were released once", async () => {
    const name = "permit:relost";
    await throughProxy(suite.server, "PERMIT.RELEASE", name, async (locks, proxy) => {
      const semaphore = locks.permitExpirableSemaphore(name);
      assert.equal(await semaphore.trySetPermits(2), true);
      const ids = await semaphore.acquire({ permits: 2, lease: -1, wait: 0 });
      assert.ok(ids !== null);
      await assert.rejects(semaphore.release(ids));
      assert.ok(proxy.fired, "the proxy lost the release's reply");
      assert.equal(await suite.redis.call("PERMIT.ACQUIRED", name), 0, "released");
      assert.equal(await semaphore.availablePermits(), 2, "given back once");
      await assert.rejects(semaphore.release(ids), NotHeld, "the ids are gone");
    });
  });

  it("setPermits, addPermits (negative too), tryRelease, updateLeaseTime; bad input refused before sending", async () => {
    await using locks = new Client(suite.redis);
    const semaphore = locks.permitExpirableSemaphore("permit:ops");
    await semaphore.setPermits(3);
    const ids = await semaphore.acquire({ permits: 2, lease: 60_000, wait: 0 });
    assert.ok(ids !== null);
    await semaphore.setPermits(4);
    assert.equal(await semaphore.getPermits(), 4);
    assert.equal(await semaphore.availablePermits(), 2);
    assert.equal(await semaphore.updateLeaseTime(ids[0]!, -1), true);
    assert.equal(await semaphore.leaseTime(ids[0]!), -1);
    assert.equal(await semaphore.tryRelease(ids[0]!), true);
    assert.equal(await semaphore.tryRelease(ids[0]!), false);
    assert.equal(await semaphore.updateLeaseTime(ids[0]!, 1_000), false);
    await assert.rejects(semaphore.release([ids[0]!, ids[1]!]), NotHeld, "all or none");
    assert.equal(await semaphore.acquiredPermits(), 1);
    await semaphore.release(ids[1]!);
    await semaphore.addPermits(-5);
    assert.equal(await semaphore.availablePermits(), -1);
    assert.equal(await semaphore.acquire({ lease: -1, wait: 0 }), null);
    assert.throws(() => locks.permitExpirableSemaphore(""), /non-empty/);
    await assert.rejects(semaphore.acquire({ permits: 0 }), RangeError);
    await assert.rejects(semaphore.acquire({ lease: 0 }), RangeError);
    await assert.rejects(semaphore.release([]), RangeError);
    await assert.rejects(semaphore.addPermits(Number.NaN), RangeError);
  });
});
