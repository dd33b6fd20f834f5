//! Waiting on the server (docs/design.md, contract §4): who of the waiters gets the lock
//! when it may have changed, and whether a new acquisition must queue behind
//! them. Pure: the shell keeps the queues and parks the clients.

use std::collections::VecDeque;

use super::error::LockError;
use super::names::{write_field, LockNames};
use super::rwlock::{read_lock, write_lock, Acquire, Mode};
use super::store::{KeyKind, Store};

/// One parked acquisition; `token` is what the shell needs to answer it.
#[derive(Debug, PartialEq, Eq)]
pub struct Ticket<T> {
    pub owner: Vec<u8>,
    pub mode: Mode,
    pub lease: i64,
    pub token: T,
}

/// Tries one acquisition as the command would.
pub fn attempt<S: Store>(
    s: &mut S,
    names: &LockNames,
    owner: &[u8],
    mode: Mode,
    lease: i64,
) -> Result<Acquire, LockError> {
    match mode {
        Mode::Read => read_lock(s, names, owner, lease),
        Mode::Write => write_lock(s, names, owner, lease),
    }
}

/// A waiter taken off the queue: it holds the lock now (`Ok(reentry)`, as in
/// [`Acquire::Acquired`]), or its attempt failed with an error it must be told.
#[derive(Debug, PartialEq, Eq)]
pub struct Served<T> {
    pub ticket: Ticket<T>,
    pub outcome: Result<bool, LockError>,
}

/// Serves the queue in arrival order: the head acquires while it can, so all
/// consecutive readers at the head get in together. A waiter whose attempt
/// fails with an error (a corrupt or retyped key) leaves with that error
/// rather than blocking the queue.
pub fn admit<S: Store, T>(
    s: &mut S,
    names: &LockNames,
    queue: &mut VecDeque<Ticket<T>>,
) -> Vec<Served<T>> {
    let mut served = Vec::new();
    while let Some(head) = queue.front() {
        let outcome = match attempt(s, names, &head.owner, head.mode, head.lease) {
            Ok(Acquire::Refused { .. }) => break,
            Ok(Acquire::Acquired { reentry }) => Ok(reentry),
            Err(e) => Err(e),
        };
        let ticket = queue.pop_front().expect("the head exists");
        served.push(Served { ticket, outcome });
    }
    served
}

/// Fair mode: a new acquisition may go ahead of the waiters only as a
/// re-entry by a current holder (so a holder never deadlocks itself).
pub fn may_overtake<S: Store>(
    s: &mut S,
    names: &LockNames,
    owner: &[u8],
) -> Result<bool, LockError> {
    let hash = names.hash();
    match s.kind(hash) {
        KeyKind::Missing => Ok(false),
        KeyKind::Hash => {
            Ok(s.hget(hash, owner).is_some() || s.hget(hash, &write_field(owner)).is_some())
        }
        KeyKind::String | KeyKind::Other => Err(LockError::WrongType),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::memstore::MemStore;
    use crate::engine::rwlock::unlock;

    fn ticket(owner: &str, mode: Mode, token: u32) -> Ticket<u32> {
        Ticket {
            owner: owner.as_bytes().to_vec(),
            mode,
            lease: 10_000,
            token,
        }
    }

    fn setup() -> (MemStore, LockNames<'static>) {
        (MemStore::new(1_000), LockNames::new(b"Q").expect("name"))
    }

    /// (token, outcome) of each waiter served.
    fn outcomes(served: Vec<Served<u32>>) -> Vec<(u32, Result<bool, LockError>)> {
        served
            .into_iter()
            .map(|s| (s.ticket.token, s.outcome))
            .collect()
    }

    #[test]
    fn consecutive_readers_at_the_head_are_admitted_together() {
        let (mut s, n) = setup();
        write_lock(&mut s, &n, b"w:1", 10_000).expect("write");
        let mut q: VecDeque<_> = [
            ticket("r:1", Mode::Read, 1),
            ticket("r:2", Mode::Read, 2),
            ticket("w:2", Mode::Write, 3),
            ticket("r:3", Mode::Read, 4),
        ]
        .into();
        assert!(
            admit(&mut s, &n, &mut q).is_empty(),
            "the writer still holds it"
        );
        unlock(&mut s, &n, b"w:1", Mode::Write, 1, None).expect("unlock");
        assert_eq!(
            outcomes(admit(&mut s, &n, &mut q)),
            vec![(1, Ok(false)), (2, Ok(false))],
            "readers in, as first holds; the writer and those behind it wait"
        );
        assert_eq!(q.len(), 2);
        unlock(&mut s, &n, b"r:1", Mode::Read, 1, None).expect("r1");
        assert!(admit(&mut s, &n, &mut q).is_empty());
        unlock(&mut s, &n, b"r:2", Mode::Read, 1, None).expect("r2");
        let served = admit(&mut s, &n, &mut q);
        assert_eq!(served.len(), 1);
        assert_eq!(served[0].ticket.owner, b"w:2");
        assert_eq!(served[0].ticket.mode, Mode::Write);
        assert_eq!(served[0].outcome, Ok(false));
    }

    #[test]
    fn a_holder_served_from_the_queue_is_told_it_re_entered() {
        let (mut s, n) = setup();
        write_lock(&mut s, &n, b"w:1", 10_000).expect("write");
        // The write holder's own read, queued behind nobody: a re-entry.
        let mut q: VecDeque<_> = [ticket("w:1", Mode::Read, 5)].into();
        assert_eq!(outcomes(admit(&mut s, &n, &mut q)), vec![(5, Ok(true))]);
    }

    #[test]
    fn a_waiting_writer_gets_the_lock_when_reader_leases_run_out() {
        let (mut s, n) = setup();
        read_lock(&mut s, &n, b"r:1", 500).expect("read");
        let mut q: VecDeque<_> = [ticket("w:1", Mode::Write, 7)].into();
        assert!(admit(&mut s, &n, &mut q).is_empty());
        s.advance(501);
        assert_eq!(outcomes(admit(&mut s, &n, &mut q)), vec![(7, Ok(false))]);
        assert!(q.is_empty());
    }

    #[test]
    fn a_corrupt_lock_fails_waiters_instead_of_blocking_them() {
        let (mut s, n) = setup();
        s.put(
            b"Q",
            crate::engine::memstore::Value::Str(b"x".to_vec()),
            None,
        );
        let mut q: VecDeque<_> =
            [ticket("r:1", Mode::Read, 1), ticket("w:1", Mode::Write, 2)].into();
        assert_eq!(
            outcomes(admit(&mut s, &n, &mut q)),
            vec![
                (1, Err(LockError::WrongType)),
                (2, Err(LockError::WrongType))
            ]
        );
    }

    #[test]
    fn only_current_holders_may_overtake_in_fair_mode() {
        let (mut s, n) = setup();
        assert_eq!(may_overtake(&mut s, &n, b"r:1"), Ok(false));
        read_lock(&mut s, &n, b"r:1", 10_000).expect("read");
        write_lock(&mut s, &n, b"w:1", 10_000).expect("refused, but no change");
        assert_eq!(may_overtake(&mut s, &n, b"r:1"), Ok(true));
        assert_eq!(may_overtake(&mut s, &n, b"r:2"), Ok(false));
        let (mut s, n) = setup();
        write_lock(&mut s, &n, b"w:1", 10_000).expect("write");
        assert_eq!(may_overtake(&mut s, &n, b"w:1"), Ok(true));
    }
}
