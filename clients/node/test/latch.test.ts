/**
 * The count-down latch (`LATCH.*`): several waiters woken at once by the
 * last count-down, a wait that runs out or is aborted leaving nothing, a
 * wait longer than the application's command timeout, a wait whose reply
 * is lost (asked again), and a count-down whose reply is lost: raised,
 * never sent again.
 */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { setTimeout as sleep } from "node:timers/promises";
import { Client } from "../src/index";
import { throughProxy } from "./proxy";
import { infoField, suiteServer, waitUntil, withClients } from "./support";

describe("count-down latch", () => {
  const suite = suiteServer();

  const blocked = async (): Promise<string | undefined> => infoField(suite.redis, "clients", "blocked_clients");

  it("four waiters on two client objects, all woken by the last count-down", async () => {
    await withClients(suite.server, 2, async (clients) => {
      const latch = clients[0]!.countDownLatch("latch:many");
      assert.equal(await latch.trySetCount(2), true);
      const waits = clients.flatMap((client) => [0, 1].map(() => client.countDownLatch("latch:many").await()));
      await waitUntil("four waiters parked", async () => (await blocked()) === "4");
      await latch.countDown();
      assert.equal(await latch.getCount(), 1);
      assert.equal(await blocked(), "4", "one count-down left: nobody answered");
      await clients[1]!.countDownLatch("latch:many").countDown();
      assert.deepEqual(await Promise.all(waits), [true, true, true, true]);
      assert.equal(await suite.redis.exists("latch:many"), 0);
      assert.deepEqual(await suite.redis.call("LOCK.WAITING"), []);
    });
  });

  it("a wait that runs out is false, an aborted one rejects with the reason; neither leaves a waiter", async () => {
    await using locks = new Client(suite.redis);
    const latch = locks.countDownLatch("latch:out");
    assert.equal(await latch.trySetCount(1), true);
    const started = performance.now();
    assert.equal(await latch.await({ wait: 400 }), false);
    assert.ok(performance.now() - started >= 350);
    assert.equal(await blocked(), "0");
    assert.deepEqual(await suite.redis.call("LOCK.WAITING"), []);

    const controller = new AbortController();
    const waiting = latch.await({ signal: controller.signal });
    await waitUntil("the waiter parked", async () => (await blocked()) === "1");
    const listed = (await suite.redis.call("LOCK.WAITING")) as unknown[][];
    assert.ok(listed.length === 1 && listed[0]!.includes("latch"), JSON.stringify(listed));
    controller.abort(new Error("shutting down"));
    await assert.rejects(waiting, /shutting down/);
    await waitUntil("no blocked client", async () => (await blocked()) === "0");
    assert.deepEqual(await suite.redis.call("LOCK.WAITING"), []);
    assert.equal(await latch.getCount(), 1);
    assert.equal(await latch.delete(), true);
    assert.equal(await latch.await({ wait: 0 }), true, "no latch: reached");
  });

  it("a wait longer than the application's commandTimeout, served by a delete", async () => {
    const app = suite.server.client({ commandTimeout: 300 });
    await using locks = new Client(app);
    const latch = locks.countDownLatch("latch:long");
    assert.equal(await latch.trySetCount(5), true);
    const waiting = latch.await({ wait: 30_000 });
    await waitUntil("the waiter parked", async () => (await blocked()) === "1");
    await sleep(1_000); // past the 300 ms commandTimeout
    assert.equal(await app.ping(), "PONG", "the application's connection is not stalled");
    assert.equal(await suite.redis.call("LATCH.DELETE", "latch:long"), 1);
    assert.equal(await waiting, true);
  });

  it("a wait's reply lost is asked again with what is left of the wait (it changes nothing)", async () => {
    await throughProxy(suite.server, "LATCH.AWAIT", "latch:asked", async (locks, proxy) => {
      const latch = locks.countDownLatch("latch:asked");
      assert.equal(await latch.trySetCount(1), true);
      await suite.redis.call("CONFIG", "RESETSTAT");
      setTimeout(() => void suite.redis.call("LATCH.COUNTDOWN", "latch:asked"), 300);
      assert.equal(await latch.await({ wait: 10_000 }), true);
      assert.ok(proxy.fired, "the proxy lost the wait's reply");
      // The look on the application's connection, the wait whose reply was lost, the wait asked again.
      assert.match(await suite.redis.info("commandstats"), /cmdstat_latch\.await:calls=3,/);
    }, ["BLOCK"]);
  });

  it("a count-down's reply lost is raised and never sent again", async () => {
    await throughProxy(suite.server, "LATCH.COUNTDOWN", "latch:lost", async (locks, proxy) => {
      const latch = locks.countDownLatch("latch:lost");
      assert.equal(await latch.trySetCount(3), true);
      await suite.redis.call("CONFIG", "RESETSTAT");
      await assert.rejects(latch.countDown());
      assert.ok(proxy.fired, "the proxy lost the reply");
      assert.match(await suite.redis.info("commandstats"), /cmdstat_latch\.countdown:calls=1,/);
      assert.equal(await suite.redis.get("latch:lost"), "2", "counted down once");
      await latch.countDown();
      assert.equal(await latch.getCount(), 1);
      assert.throws(() => locks.countDownLatch("{t}:a"), /without braces/);
      await assert.rejects(latch.trySetCount(-1), RangeError);
    });
  });
});
