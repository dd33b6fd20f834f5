//! The wait-for graph (docs/design.md, contract §14): a search, from one
//! request, for a way back to its own owner. Pure: what it walks is asked
//! of a [`View`], which the shell answers from the registry of parked
//! clients and the locks' data, so the search costs what the part of the
//! graph reachable from the request costs, and nothing is built ahead.
//!
//! Three kinds of edge, each a wait that cannot end before the other side
//! moves:
//! - a waiter waits for every owner holding one of its locks in a way that
//!   stops its hold (read from the lock's hash: script holds count); a
//!   waiter in a fair lock's line for every holder of the lock;
//! - a waiter waits for every waiter parked before it on one of its locks
//!   (the queue is served in arrival order, a fair lock's line in its
//!   list's order), unless its owner holds that lock already (a multi-hold
//!   may then go first);
//! - an owner waits for each of its own parked waiters: its client is
//!   blocked there and releases nothing until served.
//!
//! Leaving an edge out can only hide a deadlock, never report a false one,
//! so where a wait is unsure (a lock of another database) there is none.

use std::collections::{HashMap, HashSet, VecDeque};
use std::hash::Hash;

use crate::engine::names::LockId;
use crate::engine::queue::Hold;

/// What a waiter waits for on one lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Need {
    /// A hold, in the lock's queue of parked clients (`waiting::registry`).
    Hold(Hold),
    /// Its turn in a fair lock's line (`FAIRLOCK.ACQUIRE … BLOCK`): stopped
    /// by every other holder, behind the waiters before it in the line.
    Line,
}

/// A waiter as the search sees it: its owner and what it waits for.
pub type Wants = (Vec<u8>, Vec<(LockId, Need)>);

/// What the search asks of the world, for a waiter handle type `H`.
pub trait View<H> {
    /// A parked waiter's owner and the holds it waits for.
    fn waiter(&self, handle: H) -> Option<Wants>;
    /// The waiters parked on `lock` for `need` before `owner`'s `handle`
    /// (every one for `None`, a request that would queue last; in a fair
    /// lock's line, those before `owner`'s entry, if it has one). One order
    /// per lock and need: the waiters before one that is itself before
    /// another are before that other too, which lets the search ask once
    /// per line instead of once per waiter in it.
    fn ahead(&mut self, lock: &LockId, need: Need, handle: Option<H>, owner: &[u8]) -> Vec<H>;
    /// The waiters parked by `owner`.
    fn parked_by(&self, owner: &[u8]) -> Vec<H>;
    /// The owners holding `lock` in a way that stops `owner`'s `need`, and
    /// whether `owner` holds `lock` at all.
    fn holders(&mut self, lock: &LockId, owner: &[u8], need: Need) -> (Vec<Vec<u8>>, bool);
}

/// How one owner waits for another on a lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum How {
    /// The other holds the lock.
    HeldBy,
    /// The other's waiter is parked before it on the lock.
    Behind,
}

/// One wait of a cycle: `owner` waits for `lock` (`how`) for `other`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Step {
    pub owner: Vec<u8>,
    pub lock: LockId,
    pub how: How,
    pub other: Vec<u8>,
}

/// A cycle found: its waits, from the request back to its owner, and the
/// parked waiters on it (not the request itself when it is not parked).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Cycle<H> {
    pub steps: Vec<Step>,
    pub waiters: Vec<H>,
}

impl<H> Cycle<H> {
    /// The error text: `DEADLOCK` and the cycle, e.g. `DEADLOCK c waits for
    /// Q behind d; d waits for K held by c`.
    pub fn message(&self) -> String {
        let mut out = String::from("DEADLOCK ");
        for (i, step) in self.steps.iter().enumerate() {
            if i > 0 {
                out.push_str("; ");
            }
            let how = match step.how {
                How::HeldBy => "held by",
                How::Behind => "behind",
            };
            out.push_str(&format!(
                "{} waits for {} {} {}",
                String::from_utf8_lossy(&step.owner),
                String::from_utf8_lossy(&step.lock.1),
                how,
                String::from_utf8_lossy(&step.other)
            ));
        }
        out
    }
}

/// A request: who asks, for what, and its handle when it is parked already.
pub struct WaitRequest<'a, H> {
    pub owner: &'a [u8],
    pub wants: &'a [(LockId, Need)],
    pub parked: Option<H>,
}

#[derive(Clone, PartialEq, Eq, Hash)]
enum Node<H> {
    Start,
    Waiter(H),
    Owner(Vec<u8>),
}

/// How a node was reached: from which node, over which lock (none for an
/// owner's own waiter).
type Parent<H> = (Node<H>, Option<(LockId, How)>);

/// Searches breadth first from `request` for a wait on its own owner; the
/// shortest such cycle, if any. Every node is expanded once.
pub fn find<H: Copy + Eq + Hash>(
    view: &mut impl View<H>,
    request: &WaitRequest<H>,
) -> Option<Cycle<H>> {
    let target = Node::Owner(request.owner.to_vec());
    let mut parents: HashMap<Node<H>, Parent<H>> = HashMap::new();
    let mut todo = VecDeque::from([Node::Start]);
    let start = request.parked.map_or(Node::Start, Node::Waiter);
    // The waiters given by `ahead` so far, per lock and need: the ones
    // before any of them were given too (one order), so asking again for a
    // waiter among them only finds nodes reached already. A line of n
    // waiters costs n handles, not n²/2.
    let mut given: HashMap<LockId, Vec<(Need, HashSet<H>)>> = HashMap::new();
    while let Some(node) = todo.pop_front() {
        let edges: Vec<Parent<H>> = match &node {
            Node::Start | Node::Waiter(_) => {
                let (owner, wants, me) = match node {
                    Node::Waiter(h) => match view.waiter(h) {
                        Some((owner, wants)) => (owner, wants, Some(h)),
                        None => continue,
                    },
                    _ => (
                        request.owner.to_vec(),
                        request.wants.to_vec(),
                        request.parked,
                    ),
                };
                let mut out = Vec::new();
                for (lock, need) in wants {
                    // Holds of other databases are not read (see the module).
                    if lock.0 != request.wants.first().map_or(lock.0, |w| w.0 .0) {
                        continue;
                    }
                    let (held_by, mine) = view.holders(&lock, &owner, need);
                    for h in held_by {
                        out.push((Node::Owner(h), Some((lock.clone(), How::HeldBy))));
                    }
                    let asked = me.is_some_and(|h| {
                        given.get(&lock).is_some_and(|sets| {
                            sets.iter().any(|(n, set)| *n == need && set.contains(&h))
                        })
                    });
                    if !mine && !asked {
                        let ahead = view.ahead(&lock, need, me, &owner);
                        if !ahead.is_empty() {
                            let sets = given.entry(lock.clone()).or_default();
                            match sets.iter_mut().find(|(n, _)| *n == need) {
                                Some((_, set)) => set.extend(ahead.iter().copied()),
                                None => sets.push((need, ahead.iter().copied().collect())),
                            }
                        }
                        for v in ahead {
                            out.push((Node::Waiter(v), Some((lock.clone(), How::Behind))));
                        }
                    }
                }
                out
            }
            Node::Owner(o) => view
                .parked_by(o)
                .into_iter()
                .map(|v| (Node::Waiter(v), None))
                .collect(),
        };
        for (next, via) in edges {
            if next == start || parents.contains_key(&next) || next == Node::Start {
                continue;
            }
            let found = next == target;
            parents.insert(next.clone(), (node.clone(), via));
            if found {
                return Some(unwind(view, request, &parents, target));
            }
            // The request's own parked waiter is the start: never again.
            if next != target {
                todo.push_back(next);
            }
        }
    }
    None
}

/// The cycle from the start to `target`, read back through `parents`.
fn unwind<H: Copy + Eq + Hash>(
    view: &impl View<H>,
    request: &WaitRequest<H>,
    parents: &HashMap<Node<H>, Parent<H>>,
    target: Node<H>,
) -> Cycle<H> {
    let owner_of = |node: &Node<H>| -> Vec<u8> {
        match node {
            Node::Start => request.owner.to_vec(),
            Node::Waiter(h) => view.waiter(*h).map(|(o, _)| o).unwrap_or_default(),
            Node::Owner(o) => o.clone(),
        }
    };
    let mut steps = Vec::new();
    let mut waiters: Vec<H> = request.parked.into_iter().collect();
    let mut node = target;
    while let Some((parent, via)) = parents.get(&node) {
        if let Node::Waiter(h) = parent {
            waiters.push(*h);
        }
        if let Some((lock, how)) = via {
            steps.push(Step {
                owner: owner_of(parent),
                lock: lock.clone(),
                how: *how,
                other: owner_of(&node),
            });
        }
        node = parent.clone();
    }
    steps.reverse();
    waiters.dedup();
    Cycle { steps, waiters }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::lock::Options;

    const LOCK: Need = Need::Hold(Hold::Lock(Options {
        fenced: false,
        non_reentrant: false,
    }));

    /// A world of plain locks: who holds each, and parked waiters in
    /// arrival order.
    #[derive(Default)]
    struct World {
        held: HashMap<String, String>,
        /// (handle, owner, locks), in arrival order.
        parked: Vec<(u32, String, Vec<String>)>,
        asked: usize,
        /// Handles `ahead` returned, over every call.
        given: usize,
    }

    fn id(name: &str) -> LockId {
        (0, name.as_bytes().to_vec())
    }

    impl View<u32> for World {
        fn waiter(&self, handle: u32) -> Option<Wants> {
            let (_, owner, locks) = self.parked.iter().find(|(h, _, _)| *h == handle)?;
            let wants = locks.iter().map(|l| (id(l), LOCK)).collect();
            Some((owner.as_bytes().to_vec(), wants))
        }
        fn ahead(&mut self, lock: &LockId, _: Need, handle: Option<u32>, _: &[u8]) -> Vec<u32> {
            let ahead: Vec<u32> = self
                .parked
                .iter()
                .take_while(|(h, _, _)| Some(*h) != handle)
                .filter(|(_, _, locks)| locks.iter().any(|l| id(l) == *lock))
                .map(|(h, _, _)| *h)
                .collect();
            self.given += ahead.len();
            ahead
        }
        fn parked_by(&self, owner: &[u8]) -> Vec<u32> {
            self.parked
                .iter()
                .filter(|(_, o, _)| o.as_bytes() == owner)
                .map(|(h, _, _)| *h)
                .collect()
        }
        fn holders(&mut self, lock: &LockId, owner: &[u8], _: Need) -> (Vec<Vec<u8>>, bool) {
            self.asked += 1;
            let name = String::from_utf8(lock.1.clone()).expect("utf-8");
            match self.held.get(&name) {
                Some(h) if h.as_bytes() == owner => (vec![], true),
                Some(h) => (vec![h.as_bytes().to_vec()], false),
                None => (vec![], false),
            }
        }
    }

    fn world(held: &[(&str, &str)], parked: &[(u32, &str, &[&str])]) -> World {
        World {
            held: held
                .iter()
                .map(|(l, o)| (l.to_string(), o.to_string()))
                .collect(),
            parked: parked
                .iter()
                .map(|(h, o, ls)| {
                    (
                        *h,
                        o.to_string(),
                        ls.iter().map(|l| l.to_string()).collect(),
                    )
                })
                .collect(),
            asked: 0,
            given: 0,
        }
    }

    fn ask(w: &mut World, owner: &str, locks: &[&str]) -> Option<Cycle<u32>> {
        let wants: Vec<_> = locks.iter().map(|l| (id(l), LOCK)).collect();
        let request = WaitRequest {
            owner: owner.as_bytes(),
            wants: &wants,
            parked: None,
        };
        find(w, &request)
    }

    #[test]
    fn two_owners_each_holding_what_the_other_wants() {
        let mut w = world(&[("A", "a"), ("B", "b")], &[(1, "a", &["B"])]);
        let cycle = ask(&mut w, "b", &["A"]).expect("a cycle");
        assert_eq!(
            cycle.message(),
            "DEADLOCK b waits for A held by a; a waits for B held by b"
        );
        assert_eq!(cycle.waiters, vec![1]);
    }

    #[test]
    fn three_owners_in_a_ring() {
        let mut w = world(
            &[("A", "a"), ("B", "b"), ("C", "c")],
            &[(1, "a", &["B"]), (2, "b", &["C"])],
        );
        let cycle = ask(&mut w, "c", &["A"]).expect("a cycle");
        assert_eq!(
            cycle.message(),
            "DEADLOCK c waits for A held by a; a waits for B held by b; b waits for C held by c"
        );
    }

    #[test]
    fn the_issues_example_a_wait_behind_a_multi_hold() {
        // X holds Q, C holds K, D waits for K and Q at once; C asks for Q.
        let mut w = world(&[("Q", "x"), ("K", "c")], &[(1, "d", &["K", "Q"])]);
        let cycle = ask(&mut w, "c", &["Q"]).expect("a cycle");
        assert_eq!(
            cycle.message(),
            "DEADLOCK c waits for Q behind d; d waits for K held by c"
        );
    }

    #[test]
    fn a_chain_is_no_cycle() {
        let mut w = world(
            &[("A", "a"), ("B", "b"), ("C", "c")],
            &[(1, "a", &["B"]), (2, "b", &["C"]), (3, "z", &["A"])],
        );
        assert_eq!(ask(&mut w, "y", &["A"]), None);
        assert_eq!(ask(&mut w, "d", &["C"]), None);
    }

    #[test]
    fn a_wait_for_a_holder_who_waits_on_nothing_is_no_cycle() {
        let mut w = world(&[("A", "a")], &[(1, "b", &["A"])]);
        assert_eq!(ask(&mut w, "c", &["A"]), None);
    }

    #[test]
    fn a_holder_re_entering_ahead_of_waiters_does_not_wait_for_them() {
        // a holds A and waits for it behind b (say, a multi-hold): its own
        // hold lets it go first, so no wait on b.
        let mut w = world(&[("A", "a"), ("B", "b")], &[(1, "b", &["A"])]);
        assert_eq!(
            ask(&mut w, "a", &["A", "B"]).map(|c| c.message()),
            Some("DEADLOCK a waits for B held by b; b waits for A held by a".to_string())
        );
        let mut w = world(&[("A", "a")], &[(1, "b", &["A"])]);
        assert_eq!(ask(&mut w, "a", &["A"]), None);
    }

    #[test]
    fn a_parked_waiter_finds_the_cycle_through_itself() {
        // After a handoff b holds B: a's waiter now closes the ring.
        let mut w = world(
            &[("A", "a"), ("B", "b")],
            &[(1, "a", &["B"]), (2, "b", &["A"])],
        );
        let wants = vec![(id("B"), LOCK)];
        let request = WaitRequest {
            owner: b"a",
            wants: &wants,
            parked: Some(1),
        };
        let cycle = find(&mut w, &request).expect("a cycle");
        assert_eq!(cycle.waiters, vec![1, 2]);
    }

    #[test]
    fn each_lock_is_read_once_per_waiter_and_only_the_reachable_part() {
        // 1,000 waiters on 1,000 locks, none reachable from the request.
        let held: Vec<(String, String)> = (0..1_000)
            .map(|i| (format!("L{i}"), format!("h{i}")))
            .collect();
        let mut w = World::default();
        for (l, o) in &held {
            w.held.insert(l.clone(), o.clone());
        }
        for i in 0..1_000u32 {
            w.parked.push((i, format!("w{i}"), vec![format!("L{i}")]));
        }
        w.held.insert("M".into(), "w5".into());
        assert_eq!(ask(&mut w, "q", &["M"]), None);
        // M, then w5's waiter on L5, whose holder h5 waits on nothing.
        assert_eq!(w.asked, 2);
    }

    #[test]
    fn a_line_of_waiters_is_listed_once_not_once_per_waiter() {
        // 1,000 waiters on A behind its holder a; the last of them holds B,
        // which the request's owner a asks for.
        let mut w = World::default();
        w.held.insert("A".into(), "a".into());
        w.held.insert("B".into(), "w999".into());
        for i in 0..1_000u32 {
            w.parked.push((i, format!("w{i}"), vec!["A".to_string()]));
        }
        let cycle = ask(&mut w, "a", &["B"]).expect("a cycle");
        assert_eq!(
            cycle.message(),
            "DEADLOCK a waits for B held by w999; w999 waits for A held by a"
        );
        // Behind the holder b, nobody waits for the asker: no cycle, and
        // the line is listed once (the waiters before the last one are
        // before it too), where a list per waiter made it 499,500.
        w.held.insert("A".into(), "b".into());
        w.given = 0;
        assert_eq!(ask(&mut w, "a", &["B"]), None);
        assert_eq!(w.given, 999);
    }
}
