//! The registry's unit tests: queues, the agenda, multi-holds, drains,
//! without a server.

use super::*;
use crate::engine::rwlock::Mode;

fn id(name: &str) -> LockId {
    (0, name.as_bytes().to_vec())
}

fn ticket(handle: u32) -> Ticket<u32> {
    Ticket {
        owner: format!("o:{handle}").into_bytes(),
        hold: Mode::Write.into(),
        lease: 1_000,
        token: handle,
        multi: false,
        request: None,
    }
}

fn queued(r: &mut Registry<u32>, lock: &LockId) -> Vec<u32> {
    let tickets = r.take_tickets(lock).unwrap_or_default();
    let handles = tickets.iter().map(|t| t.token).collect();
    r.return_tickets(lock, tickets, []);
    handles
}

#[test]
fn an_empty_registry_is_idle_and_counts_nothing() {
    let mut r = Registry::<u32>::default();
    assert!(r.idle());
    assert_eq!(r.counts(), (0, 0));
    assert!(!r.has_waiters(&id("L")));
    assert_eq!(r.agenda().timer_needed(), None);
}

#[test]
fn waiters_queue_in_arrival_order_per_lock() {
    let mut r = Registry::default();
    r.park(id("A"), ticket(1), None, None);
    r.park(id("B"), ticket(2), None, None);
    r.park(id("A"), ticket(3), None, None);
    assert!(!r.idle());
    assert_eq!(r.counts(), (3, 2));
    assert_eq!(queued(&mut r, &id("A")), vec![1, 3]);
    assert_eq!(queued(&mut r, &id("B")), vec![2]);
    assert!(r.has_waiters(&id("A")) && !r.has_waiters(&id("C")));
}

#[test]
fn served_waiters_leave_and_the_rest_keep_their_place() {
    let mut r = Registry::default();
    for h in 1..=3 {
        r.park(id("A"), ticket(h), Some(100 + i64::from(h)), None);
    }
    let mut tickets = r.take_tickets(&id("A")).expect("a queue");
    let first = tickets.pop_front().expect("a head");
    // One queues while the machine serves the lock: it stays behind.
    r.park(id("A"), ticket(4), None, None);
    r.return_tickets(&id("A"), tickets, [first.token]);
    assert_eq!(queued(&mut r, &id("A")), vec![2, 3, 4]);
    assert_eq!(r.counts(), (3, 1));
    // The served waiter's timeout left the agenda with it.
    assert_eq!(r.agenda().timer_needed(), Some((None, 102)));
    assert_eq!(r.take_due(200), vec![Due::Timeout(2), Due::Timeout(3)]);
}

#[test]
fn the_agenda_gives_timeouts_and_deadlines_earliest_first() {
    let mut r = Registry::default();
    r.park(id("A"), ticket(1), Some(50), None);
    r.park(id("B"), ticket(2), Some(10), None);
    r.rearm(&id("A"), Some(30));
    r.rearm(&id("B"), Some(10));
    assert_eq!(r.agenda().timer_needed(), Some((None, 10)));
    let due = r.take_due(30);
    assert_eq!(
        due,
        vec![
            Due::Timeout(2),
            Due::Deadline(id("B")),
            Due::Deadline(id("A"))
        ]
    );
    assert_eq!(r.take_due(49), vec![]);
    assert_eq!(r.take_due(50), vec![Due::Timeout(1)]);
    assert_eq!(r.agenda().timer_needed(), None);
}

#[test]
fn a_timer_is_replaced_only_by_an_earlier_entry() {
    let mut r = Registry::default();
    r.park(id("A"), ticket(1), Some(100), None);
    assert_eq!(r.agenda().timer_needed(), Some((None, 100)));
    r.agenda().set_timer((7, 100));
    assert_eq!(
        r.agenda().timer_needed(),
        None,
        "a timer for the first entry is kept"
    );
    r.park(id("A"), ticket(2), Some(200), None);
    assert_eq!(
        r.agenda().timer_needed(),
        None,
        "a later entry needs no new timer"
    );
    r.park(id("A"), ticket(3), Some(40), None);
    assert_eq!(
        r.agenda().timer_needed(),
        Some((Some(7), 40)),
        "the old timer is stopped"
    );
    r.agenda().set_timer((8, 40));
    // The entry the timer was set for leaves: the early timer is kept.
    assert!(r.unregister(3).is_some());
    assert_eq!(r.agenda().timer_needed(), None);
    // A fired timer is gone: the next entry needs a new one.
    assert_eq!(r.take_due(40), vec![]);
    assert_eq!(r.agenda().timer_needed(), Some((None, 100)));
}

#[test]
fn a_moved_deadline_replaces_the_old_one_and_an_empty_queue_drops_it() {
    let mut r = Registry::default();
    r.park(id("A"), ticket(1), None, None);
    r.rearm(&id("A"), Some(500));
    r.rearm(&id("A"), Some(300));
    r.rearm(&id("A"), Some(300));
    assert_eq!(r.agenda().timer_needed(), Some((None, 300)));
    r.rearm(&id("A"), None);
    assert_eq!(
        r.agenda().timer_needed(),
        None,
        "a lock without TTL has no deadline"
    );
    r.rearm(&id("A"), Some(300));
    assert!(r.unregister(1).is_some());
    r.rearm(&id("A"), Some(300));
    assert!(r.idle(), "an emptied queue is dropped at its next rearm");
    assert_eq!(r.agenda().timer_needed(), None, "with its deadline");
}

#[test]
fn served_waiters_that_asked_for_session_are_returned_with_their_connection() {
    let mut r = Registry::default();
    r.park(id("A"), ticket(1), None, Some(41));
    r.park(id("A"), ticket(2), None, None);
    r.park(id("A"), ticket(3), None, Some(43));
    let mut tickets = r.take_tickets(&id("A")).expect("a queue");
    let served: Vec<u32> = tickets.drain(..2).map(|t| t.token).collect();
    assert_eq!(r.return_tickets(&id("A"), tickets, served), vec![(1, 41)]);
    assert_eq!(r.unregister(3).map(|w| w.session), Some(Some(43)));
}

#[test]
fn a_client_is_unregistered_once() {
    let mut r = Registry::default();
    r.park(id("A"), ticket(1), Some(10), None);
    r.park(id("A"), ticket(2), None, None);
    let waiter = r.unregister(1).expect("registered");
    assert_eq!(waiter.lock, id("A"));
    assert_eq!(r.unregister(1), None, "a second unblock never happens");
    assert_eq!(queued(&mut r, &id("A")), vec![2]);
    assert_eq!(r.take_due(100), vec![], "its timeout left the agenda");
    assert_eq!(r.counts(), (1, 1));
}

#[test]
fn one_look_at_a_time_per_lock() {
    let mut r = Registry::default();
    assert!(!r.mark_soon(&id("A")), "no queue, nothing to look at");
    r.park(id("A"), ticket(1), None, None);
    assert!(r.mark_soon(&id("A")));
    assert!(!r.mark_soon(&id("A")), "a look is due already");
    assert!(r.soon_done(&id("A")));
    assert!(r.mark_soon(&id("A")));
    assert!(!r.soon_done(&id("B")));
    assert!(!r.deadline_done(&id("B")));
}

#[test]
fn the_settling_lock_is_known_by_db_and_name_and_nests() {
    let mut r = Registry::<u32>::default();
    assert!(!r.settling(0, b"A"));
    let outer = r.settle(Some(id("A")));
    assert!(r.settling(0, b"A"));
    assert!(!r.settling(1, b"A") && !r.settling(0, b"B"));
    let inner = r.settle(Some((1, b"B".to_vec())));
    assert!(r.settling(1, b"B"));
    r.settle(inner);
    assert!(r.settling(0, b"A"));
    r.settle(outer);
    assert!(!r.settling(0, b"A"));
}

#[test]
fn locks_of_a_flushed_database_and_a_full_drain() {
    let mut r = Registry::default();
    r.park((0, b"A".to_vec()), ticket(1), Some(10), None);
    r.park((1, b"B".to_vec()), ticket(2), None, None);
    r.park((1, b"C".to_vec()), ticket(3), None, None);
    r.agenda().set_timer((9, 10));
    let mut in_one = r.locks_in(Some(1));
    in_one.sort();
    assert_eq!(in_one, vec![(1, b"B".to_vec()), (1, b"C".to_vec())]);
    assert_eq!(r.locks_in(None).len(), 3);
    let (mut handles, timer) = r.drain();
    handles.sort();
    assert_eq!(handles, vec![1, 2, 3]);
    assert_eq!(timer, Some(9));
    assert!(r.idle());
    assert_eq!(r.counts(), (0, 0));
    assert_eq!(r.agenda().timer_needed(), None);
}

/// Whether someone stands ahead of `handle` in each of its queues,
/// `serving` lent out.
fn ahead(r: &Registry<u32>, handle: u32, serving: &str) -> Vec<bool> {
    let line = r.line_of(handle, &id(serving)).expect("it waits");
    line.into_iter().map(|(_, _, ahead)| ahead).collect()
}

fn multi(handle: u32, locks: &[&str]) -> Vec<(LockId, Ticket<u32>)> {
    locks
        .iter()
        .map(|l| {
            let t = Ticket {
                multi: true,
                request: None,
                ..ticket(handle)
            };
            (id(l), t)
        })
        .collect()
}

#[test]
fn a_multi_hold_waits_in_every_queue_and_leaves_them_all_at_once() {
    let mut r = Registry::default();
    r.park(id("B"), ticket(1), None, None);
    r.park_all(multi(2, &["A", "B", "C"]), Some(50), None);
    assert_eq!(r.counts(), (2, 3), "one waiter counted once, three locks");
    assert_eq!(queued(&mut r, &id("A")), vec![2]);
    assert_eq!(queued(&mut r, &id("B")), vec![1, 2]);
    assert_eq!(
        ahead(&r, 2, "A"),
        vec![false, true, false],
        "1 is ahead of it on B"
    );
    let waiter = r.unregister(1).expect("1 waits");
    assert!(waiter.others.is_empty());
    let line = r.line_of(2, &id("A")).expect("it waits");
    assert_eq!(
        line.iter().map(|(l, _, _)| l.clone()).collect::<Vec<_>>(),
        vec![id("A"), id("B"), id("C")],
        "its holds in the listed order"
    );
    assert_eq!(ahead(&r, 2, "A"), vec![false; 3], "first everywhere");
    let waiter = r.unregister(2).expect("2 waits");
    assert_eq!(waiter.locks().count(), 3);
    for l in ["A", "B", "C"] {
        assert!(queued(&mut r, &id(l)).is_empty(), "{l}");
    }
    assert_eq!(r.take_due(100), vec![], "its one timeout left with it");
    assert_eq!(r.counts(), (0, 0));
}

#[test]
fn waiters_stand_in_the_same_order_in_every_queue_they_share() {
    // Two multi-holds listing the same locks in opposite orders: the
    // earlier is first in both queues, so one of them can always go.
    let mut r = Registry::default();
    r.park_all(multi(1, &["A", "B"]), None, None);
    r.park_all(multi(2, &["B", "A"]), None, None);
    assert_eq!(queued(&mut r, &id("A")), vec![1, 2]);
    assert_eq!(queued(&mut r, &id("B")), vec![1, 2]);
    assert_eq!(ahead(&r, 1, "A"), vec![false, false]);
    assert_eq!(ahead(&r, 1, "B"), vec![false, false]);
    assert_eq!(ahead(&r, 2, "A"), vec![true, false], "1 is ahead on B");
    assert_eq!(ahead(&r, 2, "B"), vec![false, true], "and on A");
    r.unregister(1);
    assert_eq!(ahead(&r, 2, "B"), vec![false, false]);
    assert_eq!(r.line_of(1, &id("A")), None, "1 waits no more");
}

#[test]
fn a_drain_gives_a_multi_hold_once() {
    let mut r = Registry::default();
    r.park_all(multi(1, &["A", "B"]), Some(10), None);
    r.park(id("A"), ticket(2), None, None);
    let (mut handles, _) = r.drain();
    handles.sort();
    assert_eq!(handles, vec![1, 2]);
    assert!(r.idle());
}
