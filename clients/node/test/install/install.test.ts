/**
 * The package installs as its users install it (`npm install ioredis
 * <clients/node>` in an empty project) and the README's quick start runs as
 * written (only its port changed to the test server's), and its TypeScript
 * example type-checks against the shipped types and runs.
 */

import { after, before, describe, it } from "node:test";
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { promisify } from "node:util";
import { PACKAGE, Server } from "../support";

const run = promisify(execFile);

/** The first fenced block of `language` after `heading` in the README. */
function block(readme: string, heading: string, language: string): string {
  const from = readme.indexOf(heading);
  assert.ok(from >= 0, `README has no ${heading}`);
  const found = new RegExp("```" + language + "\\n([\\s\\S]*?)```").exec(readme.slice(from));
  assert.ok(found !== null, `README has no ${language} block after ${heading}`);
  return found[1]!;
}

describe("install", () => {
  let server: Server;
  let project: string;

  before(async () => {
    server = await Server.start();
    project = mkdtempSync(join(tmpdir(), "rwlock-node-install-"));
    writeFileSync(join(project, "package.json"), JSON.stringify({ name: "app", version: "1.0.0", private: true }));
    const ioredis = JSON.parse(readFileSync(join(PACKAGE, "node_modules/ioredis/package.json"), "utf8")) as { version: string };
    // As the README says (its `prepare` builds dist/ again); the ioredis
    // tarball comes from npm's cache when it is there.
    await run("npm", ["pkg", "set", "allowScripts.rwlock-client=true", "--json"], { cwd: project, timeout: 60_000 });
    await run("npm", ["install", "--no-audit", "--no-fund", "--prefer-offline", `ioredis@${ioredis.version}`, PACKAGE], {
      cwd: project,
      timeout: 120_000,
    });
    assert.ok(readFileSync(join(project, "package.json"), "utf8").includes('"rwlock-client"'));
  });
  after(async () => {
    await server.stop();
    rmSync(project, { recursive: true, force: true });
  });

  it("the README's quick start runs as written", async () => {
    const readme = readFileSync(join(PACKAGE, "README.md"), "utf8");
    const code = block(readme, "## Quick start", "js");
    assert.ok(code.includes("new Redis(6399)"));
    writeFileSync(join(project, "quickstart.mjs"), code.replace("new Redis(6399)", `new Redis(${server.port})`));
    const { stdout } = await run("node", ["quickstart.mjs"], { cwd: project, timeout: 30_000 });
    assert.match(stdout, /invoice:42 is mine [0-9a-f-]{36}:1/);
    assert.match(stdout, /reading orders/);
    assert.match(stdout, /fencing token 1/);
    assert.match(stdout, /ledger is busy for \d+ ms more/);
    // Releases write no latch (HELD): only the fencing token's counter is left.
    const left = await server.client().keys("*");
    assert.equal(left.length, 1, String(left));
    assert.match(left[0]!, /^redisson_lock_token:/);
  });

  it("the README's TypeScript example type-checks against the shipped types, and runs", async () => {
    const readme = readFileSync(join(PACKAGE, "README.md"), "utf8");
    writeFileSync(join(project, "pay.ts"), block(readme, "await using", "ts"));
    writeFileSync(
      join(project, "tsconfig.json"),
      JSON.stringify({
        compilerOptions: {
          strict: true,
          target: "ES2022",
          lib: ["ES2022", "ESNext.Disposable"],
          module: "Node16",
          moduleResolution: "Node16",
          skipLibCheck: true,
          typeRoots: [join(PACKAGE, "node_modules/@types")],
          types: ["node"],
        },
        files: ["pay.ts"],
      }),
    );
    await run("node", [join(PACKAGE, "node_modules/typescript/bin/tsc"), "-p", "."], { cwd: project, timeout: 120_000 });
    writeFileSync(
      join(project, "driver.js"),
      `const { Redis } = require("ioredis");
const { pay } = require("./pay.js");
(async () => {
  const redis = new Redis(${server.port});
  const token = await pay(redis, "7");
  const left = await redis.exists("invoice:7");
  console.log(JSON.stringify({ token, left }));
  redis.disconnect();
})().catch((e) => { console.error(e); process.exit(1); });
`,
    );
    const { stdout } = await run("node", ["driver.js"], { cwd: project, timeout: 30_000 });
    const result = JSON.parse(stdout) as { token: number; left: number };
    assert.ok(result.token >= 1);
    assert.equal(result.left, 0, "released by await using");
  });
});
