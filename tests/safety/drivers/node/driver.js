// @ts-check
// The safety suite's driver for the Node.js package (tests/safety, mode
// nodeclient): locks of every kind with the package's default options, on
// an ioredis client that follows the master through Sentinel.
//
// Usage: node driver.js <the package's compiled dist/>, with ioredis on
// NODE_PATH (the Makefile points it at clients/node/node_modules).
// One JSON object a line on stdin, one reply a line on stdout:
//   {"op": "acquire", "kind", "lock", "owner", "lease_ms", "wait_ms",
//    "side", "locks"} -> granted (token, owner) | refused | notsynced
//       | maybe (detail)
//   {"op": "release", "kind", "lock", "owner"} -> released | notheld | maybe
// kind: fenced, plain, rw (side read or write), fair, multi (locks),
// session, block (fenced with a wait); wait_ms > 0 waits on the server
// (BLOCK).
// Environment (set by the harness): SAFETY_SENTINELS (host:port,...),
// SAFETY_MASTER_NAME, SAFETY_NAT (announced host:port=reachable
// host:port,...: the harness's proxies).
"use strict";

const readline = require("node:readline");
const { Redis } = require("ioredis");
/** @type {typeof import("../../../../clients/node/src/index")} */
const { Client, NotHeld, NotSynced } = require(process.argv[2]);

/** @param {string} text */
function address(text) {
  const at = text.lastIndexOf(":");
  return { host: text.slice(0, at), port: Number(text.slice(at + 1)) };
}

/** @type {Record<string, { host: string; port: number }>} */
const natMap = {};
for (const pair of (process.env.SAFETY_NAT ?? "").split(",")) {
  const [announced, reachable] = pair.split("=");
  natMap[announced] = address(reachable);
}
const redis = new Redis({
  sentinels: (process.env.SAFETY_SENTINELS ?? "").split(",").map(address),
  name: process.env.SAFETY_MASTER_NAME,
  natMap,
});
// The package's errors pass ioredis's through; its own reconnection logs
// nothing the harness reads.
redis.on("error", () => undefined);
const locks = new Client(redis);

/**
 * Each attempt is a lock handle of its own (a handle is an owner), kept
 * until its release.
 * @type {Map<string, import("../../../../clients/node/src/lock").Lock>}
 */
const held = new Map();

/** @param {unknown} error */
function describe(error) {
  return error instanceof Error ? `${error.name}: ${error.message}` : String(error);
}

/**
 * A reply error from the server (a replica now, loading): the command
 * wrote nothing. ioredis's ReplyError.
 * @param {unknown} error
 */
function refusedByServer(error) {
  return error instanceof Error && error.name === "ReplyError" && /^(READONLY|LOADING|NOREPLICAS)/.test(error.message);
}

/**
 * @typedef {{ op: string; kind: string; lock: string; owner: string; lease_ms?: number; wait_ms?: number;
 *   side?: string; locks?: string[] }} Request
 */

/**
 * The package's handle for the request's kind: the read-write lock's write
 * side, the session and block kinds fenced, as the harness's command
 * streams are.
 * @param {Request} request
 */
function lockFor(request) {
  switch (request.kind) {
    case "plain":
      return locks.lock(request.lock);
    case "rw": {
      const rw = locks.readWriteLock(request.lock, { fenced: true });
      return request.side === "read" ? rw.readLock() : rw.writeLock();
    }
    case "fair":
      return locks.fairLock(request.lock);
    case "multi":
      return locks.multiLock((request.locks ?? []).map((name) => locks.lock(name)));
    case "session":
      return locks.lock(request.lock, { fenced: true, session: true });
    default: // fenced, block
      return locks.fencedLock(request.lock);
  }
}

/** @param {Request} request */
async function handle(request) {
  if (request.op === "acquire") {
    const lock = lockFor(request);
    try {
      if (await lock.acquire({ wait: request.wait_ms ?? 0, lease: request.lease_ms })) {
        held.set(request.owner, lock);
        return { outcome: "granted", token: lock.token, owner: lock.owner };
      }
      return { outcome: "refused" };
    } catch (error) {
      if (error instanceof NotSynced) {
        // Released by the package, unless that release failed too: the
        // worker's release asks the server.
        held.set(request.owner, lock);
        return { outcome: "notsynced", detail: error.message };
      }
      if (refusedByServer(error)) {
        return { outcome: "refused", detail: describe(error) };
      }
      // May have been granted: the release below is asked.
      held.set(request.owner, lock);
      return { outcome: "maybe", detail: describe(error) };
    }
  }
  const lock = held.get(request.owner);
  if (lock === undefined) {
    return { outcome: "notheld", detail: "no lock handle" };
  }
  try {
    await lock.release();
    held.delete(request.owner);
    return { outcome: "released" };
  } catch (error) {
    if (error instanceof NotHeld) {
      held.delete(request.owner);
      return { outcome: "notheld", detail: error.message };
    }
    return { outcome: "maybe", detail: describe(error) };
  }
}

async function main() {
  const lines = readline.createInterface({ input: process.stdin, crlfDelay: Infinity });
  // One request at a time: the harness waits for each reply.
  for await (const line of lines) {
    const reply = await handle(JSON.parse(line));
    process.stdout.write(JSON.stringify(reply) + "\n");
  }
  await locks.close();
  redis.disconnect();
}

main().catch((error) => {
  process.stderr.write(`driver: ${describe(error)}\n`);
  process.exit(1);
});
