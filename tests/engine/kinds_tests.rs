//! Unit tests of `engine::kinds` (src/engine/kinds.rs), over the in-memory store.

use crate::memstore::MemStore;
use ::rwlock::engine::hold::Release;
use ::rwlock::engine::hold::Unlocked;
use ::rwlock::engine::kinds::*;
use ::rwlock::engine::lock::Options;
use ::rwlock::engine::names::LockNames;
use ::rwlock::engine::queue::attempt;
use ::rwlock::engine::queue::Hold;
use ::rwlock::engine::store::{KeyKind, Store};

fn names() -> LockNames<'static> {
    LockNames::new(b"S").expect("name")
}

#[test]
fn counts_are_read_per_kind_and_missing_reads_as_zero() {
    let (mut s, n) = (MemStore::new(1_000), names());
    assert_eq!(held(&mut s, &n, Kind::Read, b"a:1"), 0);
    attempt(&mut s, &n, b"a:1", Hold::Write { fenced: false }, 500).expect("write");
    attempt(&mut s, &n, b"a:1", Hold::Write { fenced: false }, 500).expect("again");
    attempt(&mut s, &n, b"a:1", Hold::Read, 500).expect("read");
    assert_eq!(held(&mut s, &n, Kind::Write, b"a:1"), 2);
    assert_eq!(held(&mut s, &n, Kind::Read, b"a:1"), 1);
    assert_eq!(held(&mut s, &n, Kind::Read, b"b:1"), 0);
    // The write re-entry added its lease to the TTL left.
    s.advance(1_100);
    assert_eq!(held(&mut s, &n, Kind::Write, b"a:1"), 0, "expired");
}

#[test]
fn release_and_renew_run_the_kinds_own_machine() {
    let (mut s, n) = (MemStore::new(1_000), names());
    let plain = Hold::Lock(Options::default());
    attempt(&mut s, &n, b"a:1", plain, 500).expect("lock");
    attempt(&mut s, &n, b"a:1", plain, 500).expect("re-entry");
    s.advance(400);
    assert!(renew(&mut s, &n, Kind::Lock, b"a:1", 500).expect("renew"));
    s.advance(400);
    assert_eq!(held(&mut s, &n, Kind::Lock, b"a:1"), 2, "renewed");
    let once = release(&mut s, &n, Kind::Lock, b"a:1", 500).expect("release");
    assert_eq!(once, Unlocked::Ran(Release::StillHeld));
    let twice = release(&mut s, &n, Kind::Lock, b"a:1", 500).expect("release");
    assert_eq!(twice, Unlocked::Ran(Release::Released));
    assert!(!renew(&mut s, &n, Kind::Lock, b"a:1", 500).expect("renew"));
    assert_eq!(s.kind(b"S"), KeyKind::Missing);
}
