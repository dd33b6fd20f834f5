/**
 * Stray sends: a command the client gave up for lost (no reply within
 * `replyMargin`, resent by the handle on another connection) is never sent
 * again. ioredis resends what a connection had not answered once it
 * reconnects (`autoResendUnfulfilledCommands`): were the package's commands
 * on the application's connection, a given-up release would run again
 * there, later, and free a hold the handle took since. They go on the
 * client object's own connection, which resends nothing.
 */

import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import type { Socket } from "node:net";
import type { Redis } from "ioredis";
import { Client, ReleaseUnknown } from "../src/index";
import { FaultProxy } from "./proxy";
import { Server, waitUntil } from "./support";

describe("stray sends", () => {
  let server: Server;
  let redis: Redis;

  before(async () => {
    server = await Server.start();
    redis = server.client();
  });
  after(async () => {
    await server.stop();
  });

  it("a release given up for lost is not sent again after a reconnect: the handle's next hold stays", async () => {
    const name = "stray:release";
    // Withholds the release's reply, its connection left open and silent.
    const proxy = await FaultProxy.start(server.port, "LOCK.UNLOCK", name, true);
    // The application's connection: once closed, it reconnects only when
    // this test says (its retry waits a minute), and queues nothing while
    // down (a command sent then fails at once): when it reconnects is the
    // test's to choose. No command timeout: what it has not answered stays
    // queued for the reconnect.
    const app = server.client({ port: proxy.port, retryStrategy: () => 60_000, enableOfflineQueue: false, commandTimeout: undefined, lazyConnect: true });
    await app.connect();
    const locks = new Client(app, { replyMargin: 2_000 });
    try {
      const lock = locks.lock(name);
      assert.equal(await lock.acquire({ wait: 0, lease: 60_000 }), true);
      // The release runs, its reply withheld; then the connection that
      // carried it closes, well within the margin: what ioredis kept
      // unanswered on it would be resent once it reconnects. The handle
      // resends the release on a dedicated connection (at once, or after
      // the margin), which finds nothing held (the first send freed it).
      const releasing = lock.release();
      await waitUntil("the release's reply withheld", () => proxy.fired);
      proxy.cut();
      await assert.rejects(releasing, ReleaseUnknown);
      assert.equal(await redis.exists(name), 0);

      // The handle takes the lock again (HELD 0).
      assert.equal(await lock.acquire({ wait: 0, lease: 60_000 }), true);
      assert.equal(await redis.hget(name, lock.owner), "1");

      // The application's connection reconnects (when it was the one cut),
      // and a PING after whatever it resent: by its reply, the server ran
      // all of that.
      if (app.status !== "ready") {
        await app.connect();
      }
      assert.equal(await app.ping(), "PONG");
      assert.equal(await redis.hget(name, lock.owner), "1", "the given-up release ran again and freed the new hold");
      assert.equal(lock.held, true);
      await lock.release();
      assert.equal(await redis.exists(name), 0);
    } finally {
      await locks.close();
      app.disconnect();
      await proxy.close();
    }
  });

  it("nothing goes on the application's connection: tries, releases, renewals of every handle on the client object's one own connection; waits on dedicated ones", async () => {
    await redis.flushall();
    const app = server.client();
    await app.ping();
    const appAddress = `127.0.0.1:${(app.stream as Socket).localPort}`;
    // Renewed every 200 ms.
    const locks = new Client(app, { watchdogTimeout: 600 });
    const monitor = await server.client().monitor();
    const sources = new Map<string, Set<string>>();
    monitor.on("monitor", (_time: string, args: string[], source: string) => {
      const command = args[0] ?? "";
      // The package's commands (this test's own ioredis calls are lower-case).
      if (/^[A-Z]/.test(command)) {
        const what = `${command}${args.includes("BLOCK") ? " BLOCK" : ""}`;
        sources.set(what, (sources.get(what) ?? new Set<string>()).add(source));
      }
    });
    try {
      // Two handles of one client object, in one tick: one connection.
      const a = locks.lock("own:a");
      const b = locks.readWriteLock("own:b").writeLock();
      assert.deepEqual(await Promise.all([a.acquire({ wait: 0 }), b.acquire({ wait: 0 })]), [true, true]);
      await waitUntil("a renewal", () => sources.has("LOCK.RENEW") && sources.has("RWLOCK.RENEW"));
      // A wait on the server: the try, then the BLOCK on a dedicated connection.
      const waiter = locks.lock("own:a");
      const waited = waiter.acquire({ wait: 10_000, lease: 10_000 });
      await waitUntil("the waiter to wait", () => sources.has("LOCK.ACQUIRE BLOCK"));
      await a.release();
      assert.equal(await waited, true);
      await waiter.release();
      await b.release();
      assert.equal(await redis.exists("own:a", "own:b"), 0);
      await waitUntil("MONITOR to show the last release", () => (sources.get("LOCK.UNLOCK")?.size ?? 0) > 0 && (sources.get("RWLOCK.UNLOCK")?.size ?? 0) > 0);

      const all = new Set([...sources.values()].flatMap((s) => [...s]));
      assert.ok(!all.has(appAddress), `sent on the application's connection: ${JSON.stringify([...sources].map(([c, s]) => [c, [...s]]))}`);
      const short = ["LOCK.ACQUIRE", "RWLOCK.WRITE", "LOCK.RENEW", "RWLOCK.RENEW", "LOCK.UNLOCK", "RWLOCK.UNLOCK"];
      const own = new Set(short.flatMap((c) => [...(sources.get(c) ?? [])]));
      assert.equal(own.size, 1, `one own connection: ${[...own].join(", ")}`);
      const blocked = sources.get("LOCK.ACQUIRE BLOCK");
      assert.equal(blocked?.size, 1);
      assert.ok(!own.has([...blocked!][0]!), "the wait on a dedicated connection");
    } finally {
      monitor.disconnect();
      await locks.close();
      app.disconnect();
    }
  });

  it("close() closes the own connection: the server sees it go", async () => {
    // The own connection is a duplicate of the application's: it has its name.
    const app = server.client({ connectionName: "stray-close" });
    await app.ping();
    const locks = new Client(app);
    const named = async (): Promise<number> => String(await redis.call("CLIENT", "LIST")).split("\n").filter((l) => l.includes(" name=stray-close ")).length;
    try {
      assert.equal(await named(), 1, "the application's");
      const lock = locks.lock("own:close");
      assert.equal(await lock.acquire({ wait: 0 }), true);
      await lock.release();
      assert.equal(await named(), 2, "one own connection opened");
      await locks.close();
      await waitUntil("the own connection to close", async () => (await named()) === 1);
      await assert.rejects(lock.acquire({ wait: 0 }), /closed/);
    } finally {
      await locks.close();
      app.disconnect();
    }
  });
});
