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

/**
 * What one acquisition took (permits, permit ids), given back once: by
 * `release()` or at the end of an `await using` block.
 */
export abstract class Releasable implements AsyncDisposable {
  private done = false;

  /** Gives back what was taken; called once. */
  protected abstract giveBack(): Promise<void>;

  /** Gives back what was taken (once; a second call does nothing). */
  async release(): Promise<void> {
    if (this.done) {
      return;
    }
    this.done = true;
    await this.giveBack();
  }

  /** `await using`: gives back what was taken at the end of the block. */
  [asyncDispose](): Promise<void> {
    return this.release();
  }
}
