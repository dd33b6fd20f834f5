//! Fencing tokens across a failover (contract §10.1). A replica's copy of a
//! token counter can be behind the tokens its master issued: replication is
//! asynchronous, so the grants of the last moments before a failover may
//! never reach it. Once promoted, the node would issue those numbers again,
//! to other owners. So the first token a promoted node issues for each
//! counter jumps `rwlock.token-gap` past the counter's value (`INCRBY`, so a
//! Redisson client's `INCR` continues from it): every later token is higher
//! than any the old master can have issued, as long as it issued fewer than
//! the gap that never reached this node.
//!
//! What is kept: whether this process was ever promoted, and the counters
//! that issued a token since its last promotion (forgotten when it stops
//! being master, and whenever the data may have moved under the names: a
//! load, SWAPDB; forgetting only ever costs one more gap).

use std::cell::RefCell;
use std::collections::{HashMap, HashSet};
use std::sync::atomic::Ordering;

use crate::config::TOKEN_GAP;

#[derive(Default)]
struct Terms {
    promoted: bool,
    /// By database, the counters that issued a token since the last
    /// promotion (looked up by the name as it comes: no copy per token).
    advanced: HashMap<i32, HashSet<Vec<u8>>>,
}

thread_local! {
    // Commands, events and timers all run on Redis's main thread.
    static TERMS: RefCell<Terms> = RefCell::default();
}

fn with<R>(f: impl FnOnce(&mut Terms) -> R) -> R {
    TERMS.with(|t| f(&mut t.borrow_mut()))
}

/// This node became master by promotion: every counter's next token jumps.
pub fn promoted() {
    with(|t| {
        t.promoted = true;
        t.advanced.clear();
    });
}

/// The names may no longer hold what they held (a load, SWAPDB, a change
/// to replica): each counter jumps again at its next token, if promoted.
pub fn forget_all() {
    with(|t| t.advanced.clear());
}

/// The gap the next token of `counter` must jump by.
pub fn gap(db: i32, counter: &[u8]) -> i64 {
    let gap = TOKEN_GAP.load(Ordering::Relaxed);
    if gap <= 0 {
        return 0;
    }
    with(|t| {
        // A lookup only on a promoted node: one that never was issues
        // Redisson's INCR as it is.
        let seen = || t.advanced.get(&db).is_some_and(|c| c.contains(counter));
        if t.promoted && !seen() {
            gap
        } else {
            0
        }
    })
}

/// `counter` issued a token: it is past the old master's tokens now.
pub fn advanced(db: i32, counter: &[u8]) {
    with(|t| {
        if t.promoted {
            let counters = t.advanced.entry(db).or_default();
            if !counters.contains(counter) {
                counters.insert(counter.to_vec());
            }
        }
    });
}
