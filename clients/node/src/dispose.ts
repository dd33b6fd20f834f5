/**
 * `Symbol.asyncDispose`, which `await using` (TypeScript 5.2+, and
 * JavaScript engines with explicit resource management) calls. Node.js has
 * it from 18.18 and 20.4; on an older Node 20 it is defined here, once, as
 * the registered symbol Node itself later used, so that `Hold` and `Client`
 * can be disposed there too.
 */

if (typeof Symbol.asyncDispose !== "symbol") {
  Object.defineProperty(Symbol, "asyncDispose", { value: Symbol.for("nodejs.asyncDispose") });
}

/** The symbol `await using` calls (`Symbol.asyncDispose`), present after this module loaded. */
export const asyncDispose: typeof Symbol.asyncDispose = Symbol.asyncDispose;
