//! Unit tests of `engine::holders` (src/engine/holders.rs), over the in-memory store.

use crate::memstore::MemStore;
use ::rwlock::engine::holders::*;
use ::rwlock::engine::kinds::Kind;
use ::rwlock::engine::lock::Options;
use ::rwlock::engine::names::LockNames;
use ::rwlock::engine::queue::attempt;
use ::rwlock::engine::queue::Hold;

const READ: Hold = Hold::Read;
const WRITE: Hold = Hold::Write { fenced: false };
const LOCK: Hold = Hold::Lock(Options {
    fenced: false,
    non_reentrant: false,
});

fn take(s: &mut MemStore, owner: &str, hold: Hold) {
    let n = LockNames::new(b"L").expect("name");
    attempt(s, &n, owner.as_bytes(), hold, 10_000).expect("attempt");
}

fn who(s: &mut MemStore, owner: &str, hold: Hold) -> (Vec<String>, bool) {
    let (owners, mine) = blockers(s, b"L", owner.as_bytes(), hold);
    let owners = owners
        .into_iter()
        .map(|o| String::from_utf8(o).expect("utf-8"))
        .collect();
    (owners, mine)
}

#[test]
fn all_holds_with_their_kind_and_count() {
    let mut s = MemStore::new(1_000);
    take(&mut s, "w", WRITE);
    take(&mut s, "w", WRITE);
    take(&mut s, "w", READ);
    let mut got = all(&mut s, b"L");
    got.sort();
    assert_eq!(
        got,
        vec![
            (b"w".to_vec(), Kind::Read, 1),
            (b"w".to_vec(), Kind::Write, 2)
        ]
    );
    let mut s = MemStore::new(1_000);
    take(&mut s, "p", LOCK);
    assert_eq!(all(&mut s, b"L"), vec![(b"p".to_vec(), Kind::Lock, 1)]);
    assert!(all(&mut s, b"missing").is_empty());
}

#[test]
fn only_a_readers_write_hold_is_an_upgrade() {
    let mut s = MemStore::new(1_000);
    take(&mut s, "r", READ);
    assert!(upgrade(&mut s, b"L", b"r", WRITE));
    assert!(!upgrade(&mut s, b"L", b"r", READ));
    assert!(!upgrade(&mut s, b"L", b"x", WRITE));
    let mut s = MemStore::new(1_000);
    take(&mut s, "w", WRITE);
    take(&mut s, "w", READ);
    assert!(!upgrade(&mut s, b"L", b"w", WRITE), "a re-entry");
    assert!(!upgrade(&mut s, b"M", b"w", WRITE), "no lock");
}

#[test]
fn a_free_lock_stops_nobody() {
    let mut s = MemStore::new(1_000);
    assert_eq!(who(&mut s, "a", WRITE), (vec![], false));
    assert_eq!(who(&mut s, "a", LOCK), (vec![], false));
}

#[test]
fn readers_stop_writers_but_not_readers() {
    let mut s = MemStore::new(1_000);
    take(&mut s, "r1", READ);
    take(&mut s, "r2", READ);
    take(&mut s, "r1", READ);
    assert_eq!(who(&mut s, "x", READ), (vec![], false));
    let both = vec!["r1".to_string(), "r2".to_string()];
    assert_eq!(who(&mut s, "x", WRITE), (both.clone(), false));
    // The upgrade: r1's own read hold stops its write hold.
    assert_eq!(who(&mut s, "r1", WRITE), (both, true));
}

#[test]
fn a_writer_stops_everyone_but_itself() {
    let mut s = MemStore::new(1_000);
    take(&mut s, "w", WRITE);
    take(&mut s, "w", READ);
    assert_eq!(who(&mut s, "x", READ), (vec!["w".to_string()], false));
    assert_eq!(who(&mut s, "x", WRITE), (vec!["w".to_string()], false));
    assert_eq!(who(&mut s, "w", WRITE), (vec![], true), "a re-entry");
    assert_eq!(who(&mut s, "w", READ), (vec![], true), "write then read");
}

#[test]
fn a_plain_lock_stops_all_but_its_holder() {
    let mut s = MemStore::new(1_000);
    take(&mut s, "p", LOCK);
    assert_eq!(who(&mut s, "x", LOCK), (vec!["p".to_string()], false));
    assert_eq!(who(&mut s, "p", LOCK), (vec![], true));
}

#[test]
fn a_hold_of_the_other_kind_stops_nothing_here() {
    let mut s = MemStore::new(1_000);
    take(&mut s, "p", LOCK);
    assert_eq!(who(&mut s, "x", WRITE), (vec![], false));
    let mut s = MemStore::new(1_000);
    take(&mut s, "w", WRITE);
    assert_eq!(who(&mut s, "x", LOCK), (vec![], false));
}
