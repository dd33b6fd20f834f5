//! Module configuration (docs/design.md, contract §5): `rwlock.publish`,
//! `rwlock.fairness`, `rwlock.default-lease` and `rwlock.fair-wait`, `rwlock.lease-index-from`
//! (see `leases`) and `rwlock.token-gap` (see `tokens`), settable as module arguments
//! at load time and with CONFIG SET.

use std::ops::RangeInclusive;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Mutex;

use redis_module::RedisString;

use crate::engine::error::MAX_MILLIS;
use crate::engine::int::parse_i64;
use crate::engine::rwlock::MAX_HOLDS;

pub use fairness::Fairness;
pub use publish::PublishMode;

/// A config of named choices. The variants are the values users type,
/// hence lower case.
macro_rules! choices {
    ($module:ident :: $name:ident { $($value:ident = $n:literal),+ }) => {
        mod $module {
            redis_module::enum_configuration! {
                #[allow(non_camel_case_types)]
                #[derive(Debug, PartialEq, Eq, Copy)]
                pub enum $name {
                    $($value = $n,)+
                }
            }
        }
    };
}

choices!(publish::PublishMode { auto = 0, publish = 1, spublish = 2 });
choices!(fairness::Fairness { none = 0, fifo = 1 });

pub const DEFAULT_LEASE_MS: i64 = 30_000;
/// Redisson's `fairLockWaitTimeout` default: a fair lock waiter's wait.
pub const FAIR_WAIT_MS: i64 = 300_000;

pub static PUBLISH: Mutex<PublishMode> = Mutex::new(PublishMode::auto);
pub static FAIRNESS: Mutex<Fairness> = Mutex::new(Fairness::none);
pub static DEFAULT_LEASE: AtomicI64 = AtomicI64::new(DEFAULT_LEASE_MS);
/// `rwlock.fair-wait`: FAIRLOCK.ACQUIRE's and CANCEL's wait without `WAIT`.
pub static FAIR_WAIT: AtomicI64 = AtomicI64::new(FAIR_WAIT_MS);
/// `rwlock.lease-index-from`: leases a lock needs before its index is kept
/// (0: never; see `keyspace::leases`).
pub const LEASE_INDEX_FROM_DEFAULT: i64 = 64;
pub static LEASE_INDEX_FROM: AtomicI64 = AtomicI64::new(LEASE_INDEX_FROM_DEFAULT);
/// `rwlock.token-gap`: how far a promoted node's first token of a counter
/// jumps (0: never; see `keyspace::tokens`).
pub const TOKEN_GAP_DEFAULT: i64 = 1_000_000_000;
pub static TOKEN_GAP: AtomicI64 = AtomicI64::new(TOKEN_GAP_DEFAULT);

pub fn publish_mode() -> PublishMode {
    *PUBLISH.lock().unwrap_or_else(|e| e.into_inner())
}

pub fn fair() -> bool {
    *FAIRNESS.lock().unwrap_or_else(|e| e.into_inner()) == Fairness::fifo
}

pub fn default_lease() -> i64 {
    DEFAULT_LEASE.load(Ordering::Relaxed)
}

pub fn fair_wait() -> i64 {
    FAIR_WAIT.load(Ordering::Relaxed)
}

/// `rwlock.deadlock-detection`: a request that would park into a cycle of
/// waits fails with `DEADLOCK` (contract §14).
pub static DEADLOCK_DETECTION: AtomicBool = AtomicBool::new(true);

pub fn deadlock_detection() -> bool {
    DEADLOCK_DETECTION.load(Ordering::Relaxed)
}

fn pick<T: Copy>(options: &[(&str, T)], value: &[u8]) -> Option<T> {
    options
        .iter()
        .find(|(name, _)| name.as_bytes().eq_ignore_ascii_case(value))
        .map(|(_, v)| *v)
}

/// Applies `name value …` module arguments (names with or without the
/// `rwlock.` prefix). Any unknown name or bad value fails the load, so a typo
/// never runs silently with defaults.
pub fn apply_module_args(args: &[RedisString]) -> Result<(), String> {
    if !args.len().is_multiple_of(2) {
        return Err("module arguments must be 'name value' pairs".into());
    }
    for pair in args.chunks(2) {
        let raw_name = pair[0].as_slice();
        let name = raw_name.strip_prefix(b"rwlock.").unwrap_or(raw_name);
        let value = pair[1].as_slice();
        let bad = || {
            format!(
                "bad value '{}' for {}",
                String::from_utf8_lossy(value),
                String::from_utf8_lossy(raw_name)
            )
        };
        // The integer settings: the value within the setting's range.
        let number = |range: RangeInclusive<i64>| {
            parse_i64(value)
                .filter(|n| range.contains(n))
                .ok_or_else(bad)
        };
        match name {
            b"publish" => {
                let options = [
                    ("auto", PublishMode::auto),
                    ("publish", PublishMode::publish),
                    ("spublish", PublishMode::spublish),
                ];
                let mode = pick(&options, value).ok_or_else(bad)?;
                *PUBLISH.lock().unwrap_or_else(|e| e.into_inner()) = mode;
            }
            b"fairness" => {
                let options = [("none", Fairness::none), ("fifo", Fairness::fifo)];
                let mode = pick(&options, value).ok_or_else(bad)?;
                *FAIRNESS.lock().unwrap_or_else(|e| e.into_inner()) = mode;
            }
            b"lease-index-from" => {
                LEASE_INDEX_FROM.store(number(0..=MAX_HOLDS)?, Ordering::Relaxed)
            }
            b"token-gap" => TOKEN_GAP.store(number(0..=i64::MAX)?, Ordering::Relaxed),
            b"deadlock-detection" => {
                let on = pick(&[("yes", true), ("no", false)], value).ok_or_else(bad)?;
                DEADLOCK_DETECTION.store(on, Ordering::Relaxed);
            }
            b"default-lease" => DEFAULT_LEASE.store(number(1..=MAX_MILLIS)?, Ordering::Relaxed),
            b"fair-wait" => FAIR_WAIT.store(number(0..=MAX_MILLIS)?, Ordering::Relaxed),
            _ => {
                return Err(format!(
                    "unknown module argument '{}'",
                    String::from_utf8_lossy(raw_name)
                ))
            }
        }
    }
    Ok(())
}
