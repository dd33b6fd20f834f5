//! The kinds of lock the waiting sections (handoff, contended) drive: how a
//! client takes one with the module, with `BLOCK`, with Redisson's script,
//! and releases it, and the channel Redisson's clients listen on; and
//! Redisson's SpinLock back-off, the other way its clients wait.

use std::time::Duration;

use crate::scripts::Scripts;

pub const LEASE: &str = "30000";
/// Long enough that a waiter never gives up during a run.
const BLOCK_MS: &str = "10000";

pub struct LockKind {
    /// As a case names it.
    pub name: &'static str,
    /// The module's acquisition (`lock owner lease` follow).
    acquire: &'static str,
    /// The module's release: the command, then what follows `lock owner`.
    release: (&'static str, &'static [&'static str]),
    /// The channel Redisson's clients subscribe to for a lock's release.
    pub channel: fn(&str) -> String,
    /// Redisson's acquisition of the lock by `owner`'s client, by EVALSHA.
    script: fn(&Scripts, &str, &str) -> Vec<String>,
}

fn strings(args: &[&str]) -> Vec<String> {
    args.iter().map(|a| a.to_string()).collect()
}

/// The read-write lock's write hold.
pub static WRITE: LockKind = LockKind {
    name: "write lock",
    acquire: "RWLOCK.WRITE",
    release: ("RWLOCK.UNLOCK", &["WRITE"]),
    channel: testkit::channel,
    script: |s, lock, owner| {
        let field = format!("{owner}:write");
        strings(&["EVALSHA", &s.write_lock, "1", lock, LEASE, &field])
    },
};

/// Redisson's plain lock, `RLock`.
pub static PLAIN: LockKind = LockKind {
    name: "plain lock",
    acquire: "LOCK.ACQUIRE",
    release: ("LOCK.UNLOCK", &[]),
    channel: plain_channel,
    script: |s, lock, owner| strings(&["EVALSHA", &s.plain().lock, "1", lock, LEASE, owner]),
};

/// The plain lock's channel, `redisson_lock__channel:{lock}`.
pub fn plain_channel(lock: &str) -> String {
    format!("redisson_lock__channel:{}", testkit::prefix_of(lock))
}

impl LockKind {
    pub fn acquire(&self, lock: &str, owner: &str) -> Vec<String> {
        strings(&[self.acquire, lock, owner, LEASE])
    }

    /// The acquisition parked on the server until the lock is free.
    pub fn blocking(&self, lock: &str, owner: &str) -> Vec<String> {
        strings(&[self.acquire, lock, owner, LEASE, "BLOCK", BLOCK_MS])
    }

    pub fn script(&self, scripts: &Scripts, lock: &str, owner: &str) -> Vec<String> {
        (self.script)(scripts, lock, owner)
    }

    pub fn release(&self, lock: &str, owner: &str) -> Vec<String> {
        let (command, rest) = self.release;
        let mut args = strings(&[command, lock, owner]);
        args.extend(strings(rest));
        args
    }
}

/// Redisson's `SpinLock` back-off (`LockOptions.ExponentialBackOff`, its
/// default): after each refusal the client sleeps, first 1 ms, then twice
/// the last sleep plus a random 0 to n-1 ms at the n-th refusal, at most
/// 128 ms, and tries again.
pub struct SpinBackoff {
    next_ms: u64,
    refusals: u64,
    rng: testkit::Rng,
}

const SPIN_FIRST_MS: u64 = 1;
const SPIN_MAX_MS: u64 = 128;

impl SpinBackoff {
    pub fn new(seed: u64) -> SpinBackoff {
        SpinBackoff {
            next_ms: SPIN_FIRST_MS,
            refusals: 0,
            rng: testkit::Rng(seed),
        }
    }

    /// How long to sleep after this refusal.
    pub fn sleep(&mut self) -> Duration {
        let now = self.next_ms;
        if now < SPIN_MAX_MS {
            self.refusals += 1;
            let jitter = self.rng.below(self.refusals);
            self.next_ms = (now * 2 + jitter).min(SPIN_MAX_MS);
        }
        Duration::from_millis(now)
    }
}
