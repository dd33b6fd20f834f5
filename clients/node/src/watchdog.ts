/**
 * The lease renewer: Redisson's lock watchdog, as a timer. While a hold
 * taken without a lease lives, it renews the lease every third of it; it
 * stops when told to, or when the server says the owner no longer holds the
 * lock (the lease ran out, the lock was forced open), which it reports.
 */

/** Renews a hold every `lease / 3` ms until stopped or lost. */
export class Watchdog {
  private timer: NodeJS.Timeout | undefined;
  private stopped = false;
  private lastRenewal = Date.now();

  /**
   * `leaseMs`: the lease each renewal sets; `renew`: one renewal, resolving
   * whether the owner still held it; `onLost`: called once when a renewal
   * said no, or none succeeded for a whole lease (server unreachable).
   */
  constructor(
    private readonly leaseMs: number,
    private readonly renew: () => Promise<boolean>,
    private readonly onLost: (cause: unknown) => void,
  ) {}

  /** Schedules the first renewal. */
  start(): void {
    this.schedule();
  }

  private schedule(): void {
    if (this.stopped) {
      return;
    }
    // The next renewal is scheduled when this one is done, so a slow
    // server never gets two at once. Unref'd: a hold alone does not keep
    // the process alive (the client object's connections do, until it
    // closes).
    this.timer = setTimeout(() => void this.tick(), Math.max(1, Math.floor(this.leaseMs / 3)));
    this.timer.unref();
  }

  private async tick(): Promise<void> {
    let held: boolean;
    let cause: unknown = null;
    try {
      held = await this.renew();
    } catch (error) {
      // The connection: try again next time, while the lease may still run.
      if (Date.now() - this.lastRenewal < this.leaseMs) {
        this.schedule();
        return;
      }
      held = false;
      cause = error;
    }
    if (this.stopped) {
      return;
    }
    if (!held) {
      this.stopped = true;
      this.onLost(cause);
      return;
    }
    this.lastRenewal = Date.now();
    this.schedule();
  }

  /** Stops renewing (the hold was released). */
  stop(): void {
    this.stopped = true;
    if (this.timer !== undefined) {
      clearTimeout(this.timer);
      this.timer = undefined;
    }
  }
}
