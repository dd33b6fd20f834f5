/** RedLock over 5 independent servers: 2 stopped → acquired; 3 stopped (one frozen) → refused, nothing left held. */

import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { Redis } from "ioredis";
import { NotAcquired, NotHeld, RedLock, drift, quorum } from "../src/index";
import { Server } from "./support";

describe("RedLock", () => {
  let servers: Server[];
  let clients: Redis[];

  before(async () => {
    servers = await Promise.all([0, 1, 2, 3, 4].map(() => Server.start()));
    clients = servers.map((s) => s.client({ commandTimeout: 2_000 }));
  });
  after(async () => {
    await Promise.all(servers.map((s) => s.stop()));
  });

  it("the arithmetic: quorum N/2+1, drift 1% + 2 ms", () => {
    assert.deepEqual([1, 2, 3, 4, 5].map(quorum), [1, 2, 2, 3, 3]);
    assert.equal(drift(10_000), 102);
    assert.throws(() => new RedLock([], "x"), RangeError);
  });

  it("all up: held on every node; released on every node", async () => {
    // A node timeout above the default 100 ms: on a loaded test machine a node can take longer to
    // answer, and a quorum (3) would then grant while this test counts all 5 nodes.
    await using red = new RedLock(clients, "red", { nodeTimeout: 5_000 });
    const began = performance.now();
    const validity = await red.acquire({ wait: 3_000, lease: 10_000 }); // retried if a loaded machine slows a node past 100 ms
    // The lease less the drift (102 ms) and the time the acquisition took, however long that was.
    const least = 10_000 - drift(10_000) - (performance.now() - began);
    assert.ok(validity !== null && validity >= least && validity < 10_000, `${validity} < ${least}`);
    for (const client of clients) {
      assert.equal(await client.hget("red", red.owner), "1");
    }
    assert.ok(red.validity() > 0);
    assert.equal(await red.release(), 5);
    await assert.rejects(red.release(), NotHeld);
  });

  it("2 of 5 stopped: acquired on the 3 left; 3 stopped (one frozen): refused within the wait, nothing held", async () => {
    await using red = new RedLock(clients, "red2", { nodeTimeout: 100, retryDelay: 50 });
    await servers[3]!.stop();
    await servers[4]!.stop();
    const started = performance.now();
    const validity = await red.acquire({ wait: 3_000, lease: 10_000 }); // retried if a loaded machine slows a node past 100 ms
    const least = 10_000 - drift(10_000) - (performance.now() - started);
    assert.ok(validity !== null && validity >= least, `${validity} < ${least}`);
    assert.ok(performance.now() - started < 3_000);
    for (const client of clients.slice(0, 3)) {
      assert.equal(await client.hget("red2", red.owner), "1");
    }
    assert.equal(await red.release(), 3);

    servers[2]!.pause();
    try {
      const trying = performance.now();
      assert.equal(await red.acquire({ wait: 400, lease: 10_000 }), null);
      const elapsed = performance.now() - trying;
      // At the end of its 400 ms wait, not after retries past it: 4 s leave a loaded machine room.
      assert.ok(elapsed >= 300 && elapsed < 4_000, `${elapsed}`);
      await assert.rejects(red.hold({ lease: 10_000 }), NotAcquired);
      for (const client of clients.slice(0, 2)) {
        assert.equal(await client.exists("red2"), 0, "released where it was granted");
      }
    } finally {
      servers[2]!.resume();
    }
    // The frozen node may have taken it late: the release went there too,
    // or its lease ends it; the others hold nothing.
    const controller = new AbortController();
    controller.abort();
    await assert.rejects(red.acquire({ signal: controller.signal }), { name: "AbortError" });
  });
});
