// One scenario of make bench-clients (benches/clients/run.py) with one
// library: this repository's client ("rwlock", clients/node/dist of this
// checkout) or redlock 4 ("redlock", npm's most-downloaded Redis lock
// package), each on one ioredis connection per process, workers being
// concurrent async loops. Warms up, prints READY, runs for --seconds once it
// reads GO, prints its counts as one JSON line, and releases what it holds
// once its standard input closes (after run.py read the server's counters).
"use strict";

const path = require("node:path");
const readline = require("node:readline");
const { parseArgs } = require("node:util");
const Redis = require("ioredis");
const Redlock = require("redlock");
const { Client } = require(path.join(__dirname, "..", "..", "..", "clients", "node", "dist"));

// redlock's lease: the watchdog lease our locks take without one (30 s), so
// that no hold ends on its own during a run.
const LEASE_MS = 30_000;

const { values: args } = parseArgs({
  options: {
    port: { type: "string" },
    lib: { type: "string", default: "rwlock" },
    scenario: { type: "string", default: "uncontended" },
    workers: { type: "string", default: "1" },
    seconds: { type: "string", default: "3" },
    warmup: { type: "string", default: "0.5" },
  },
});

// A worker's handle, whatever the library: lock() resolves true when held,
// false when the library gave up waiting; tryLock() takes it only if free.
function ours(lock) {
  return {
    lock: () => lock.acquire(),
    tryLock: () => lock.acquire({ wait: 0 }),
    unlock: () => lock.release(),
  };
}

function peer(redlock, tryRedlock, name) {
  let held = null;
  const attempt = async (rl) => {
    try {
      held = await rl.lock(name, LEASE_MS);
      return true;
    } catch (e) {
      if (e instanceof Redlock.LockError) return false;
      throw e;
    }
  };
  return {
    lock: () => attempt(redlock),
    tryLock: () => attempt(tryRedlock),
    unlock: async () => {
      const lock = held;
      held = null;
      await lock.unlock();
    },
  };
}

async function phase(scenario, workers, writer, seconds) {
  let stop = false;
  const per = workers.map(() => 0);
  let failed = 0;
  const waits = [];
  const handoff = { releaseAt: 0n, last: -1, samples: [], same: 0, changes: 0 };
  const work = async (i, w) => {
    while (!stop) {
      if (scenario === "try") {
        if (await w.tryLock()) throw new Error("a try took a held lock");
        per[i]++;
        continue;
      }
      if (!(await w.lock())) {
        failed++;
        continue;
      }
      if (scenario === "contended") {
        // From a holder starting its release to the next holder's
        // acquisition returning, when that holder is another worker.
        const now = process.hrtime.bigint();
        if (handoff.last === i) handoff.same++;
        else if (handoff.last >= 0) {
          handoff.changes++;
          handoff.samples.push(Number(now - handoff.releaseAt) / 1e3);
        }
        handoff.last = i;
        handoff.releaseAt = process.hrtime.bigint();
      }
      await w.unlock();
      per[i]++;
    }
  };
  const write = async (w) => {
    while (!stop) {
      const t0 = process.hrtime.bigint();
      if (!(await w.lock())) {
        failed++;
        continue;
      }
      waits.push(Number(process.hrtime.bigint() - t0) / 1e3);
      await w.unlock();
    }
  };
  const start = process.hrtime.bigint();
  const timer = setTimeout(() => {
    stop = true;
  }, seconds * 1000);
  const loops = workers.map((w, i) => work(i, w));
  if (writer) loops.push(write(writer));
  try {
    await Promise.all(loops);
  } finally {
    clearTimeout(timer);
    stop = true;
  }
  const result = {
    cycles: per.reduce((a, b) => a + b, 0) + waits.length,
    failed,
    elapsed_s: Number(process.hrtime.bigint() - start) / 1e9,
    per_worker: per,
    writer_wait_us: waits,
  };
  if (scenario === "contended") {
    result.handoff_us = handoff.samples;
    if (handoff.same + handoff.changes > 0) result.same_again = handoff.same / (handoff.same + handoff.changes);
  }
  return result;
}

async function main() {
  const redis = new Redis({ host: "127.0.0.1", port: Number(args.port), lazyConnect: true });
  await redis.connect();
  let locks = null;
  let make;
  let makeRW = null;
  if (args.lib === "rwlock") {
    locks = new Client(redis);
    make = (name) => ours(locks.lock(name));
    makeRW = (name, write) => {
      const rw = locks.readWriteLock(name);
      return ours(write ? rw.writeLock() : rw.readLock());
    };
  } else if (args.lib === "redlock") {
    // Its defaults (10 retries 200 +/- 100 ms apart) but the tries', which
    // give up at once.
    const redlock = new Redlock([redis]);
    const tryRedlock = new Redlock([redis], { retryCount: 0 });
    make = (name) => peer(redlock, tryRedlock, name);
  } else {
    throw new Error(`unknown library ${args.lib}`);
  }

  const n = Number(args.workers);
  let workers = [];
  let writer = null;
  let holder = null;
  switch (args.scenario) {
    case "uncontended":
      workers = Array.from({ length: n }, (_, i) => make(`bench:u:${i}`));
      break;
    case "contended":
      workers = Array.from({ length: n }, () => make("bench:c"));
      break;
    case "try":
      holder = make("bench:t");
      if (!(await holder.lock())) throw new Error("try: the holder did not get the lock");
      workers = Array.from({ length: n }, () => make("bench:t"));
      break;
    case "rw":
      if (!makeRW) throw new Error(`${args.lib} has no read-write lock`);
      workers = Array.from({ length: n }, () => makeRW("bench:rw", false));
      writer = makeRW("bench:rw", true);
      break;
    default:
      throw new Error(`unknown scenario ${args.scenario}`);
  }

  await phase(args.scenario, workers, writer, Number(args.warmup));
  const input = readline.createInterface({ input: process.stdin });
  const lines = input[Symbol.asyncIterator]();
  process.stdout.write("READY\n");
  const go = await lines.next();
  if (go.done || go.value.trim() !== "GO") throw new Error("expected GO on standard input");
  const result = await phase(args.scenario, workers, writer, Number(args.seconds));
  process.stdout.write(JSON.stringify(result) + "\n");
  // run.py reads the server's counters, then closes our input.
  while (!(await lines.next()).done) {
    // nothing else comes
  }
  if (holder) await holder.unlock();
  if (locks) await locks.close();
  redis.disconnect();
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});
