/** The package's files import one another without cycles (as the module's tests/layering.rs requires of src/). */

import { describe, it } from "node:test";
import assert from "node:assert/strict";
import { readdirSync, readFileSync } from "node:fs";
import { join } from "node:path";
import { PACKAGE } from "./support";

const SRC = join(PACKAGE, "src");

/** Each file of src/ and the files of src/ it imports (type-only imports too). */
function graph(): Map<string, string[]> {
  const edges = new Map<string, string[]>();
  for (const file of readdirSync(SRC).filter((f) => f.endsWith(".ts"))) {
    const text = readFileSync(join(SRC, file), "utf8");
    const imports = [...text.matchAll(/(?:import|export)\s[^;]*?from\s+"\.\/([^"]+)"/g)].map((m) => `${m[1]}.ts`);
    edges.set(file, [...new Set(imports)]);
  }
  return edges;
}

/** A cycle of the graph, or null. */
function findCycle(edges: Map<string, string[]>): string[] | null {
  const state = new Map<string, "open" | "done">();
  const path: string[] = [];
  const visit = (file: string): string[] | null => {
    if (state.get(file) === "done") return null;
    if (state.get(file) === "open") return [...path.slice(path.indexOf(file)), file];
    state.set(file, "open");
    path.push(file);
    for (const next of edges.get(file) ?? []) {
      const cycle = visit(next);
      if (cycle !== null) return cycle;
    }
    path.pop();
    state.set(file, "done");
    return null;
  };
  for (const file of edges.keys()) {
    const cycle = visit(file);
    if (cycle !== null) return cycle;
  }
  return null;
}

describe("layering", () => {
  it("src/ has no import cycle, and every import names a file of src/", () => {
    const edges = graph();
    assert.ok(edges.size >= 10, `only ${edges.size} files found`);
    for (const [file, imports] of edges) {
      for (const target of imports) {
        assert.ok(edges.has(target), `${file} imports ${target}, not a file of src/`);
      }
    }
    assert.equal(findCycle(edges), null);
    assert.ok((edges.get("index.ts") ?? []).includes("client.ts"));
  });

  it("the checker finds a cycle when there is one", () => {
    const edges = new Map([["a.ts", ["b.ts"]], ["b.ts", ["c.ts"]], ["c.ts", ["a.ts"]]]);
    assert.deepEqual(findCycle(edges), ["a.ts", "b.ts", "c.ts", "a.ts"]);
  });
});
