//! Torture: many concurrent clients hammer a few locks with short leases,
//! mixing reads, writes, re-entries, unlocks, renewals and BLOCK waits, and
//! sometimes sleeping past their lease or walking away from a hold. Each
//! client logs, from its own replies only, the intervals in which it may
//! believe it holds a lock. An independent checker then proves mutual
//! exclusion from those logs alone: no write interval of one owner overlaps
//! any interval of another owner on the same lock.
//!
//! A client's claims are conservative (never longer than the server can
//! guarantee): a hold begins when the acquiring reply arrives and ends at
//! the send time of the command, cut to the millisecond, plus the lease (the
//! server counts the lease from when it ran the command, which is after the
//! send, in whole milliseconds), or earlier, at the send time of a command
//! that ends or may shorten it. A client whose belief may have drifted from
//! the server (a lease passed while it slept, or it walked away) forgets the
//! lock and keeps away from it until everything it may still hold there has
//! expired. Client and server read the same wall clock. All clients of a
//! lock use the same lease, as a Redisson application does with its watchdog
//! timeout (see docs/testing.md, "Why every torture client of a lock uses the same lease", for why mixed leases are
//! another matter).
//!
//! A second run does the same with Redisson's plain lock (`LOCK.*`), whose
//! holds are all exclusive, half of its locks fenced: every acquisition there
//! is `FENCED`, and each client also logs the token each reply gave it. A
//! second checker proves from those logs that a lock never handed out one
//! token twice nor skipped one, that a token answered before another
//! acquisition was sent is below that one's, and that the tokens of
//! successive holders of one lock (re-entries included) strictly increase.
//!
//! `RWLOCK_TORTURE_CLIENTS`, `RWLOCK_TORTURE_OPS`, `RWLOCK_TORTURE_LOCKS` and
//! `RWLOCK_TORTURE_BUDGET_S` size a run (defaults 64, 100000, 8, 120; for the
//! plain lock 64, 30000, 16, 120; `make torture` runs bigger ones);
//! `RWLOCK_TEST_SEED` replays one.

use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::Arc;
use std::thread;
use std::time::{Duration, Instant};

use redis::Value;
use testkit::Conn;
use testkit::{env_usize, fenced_pair, seed, token_counter, wall_us, Rng, Server};

/// Lease of lock i (ms): every client uses its lock's lease.
const LEASES_MS: [i64; 4] = [50, 80, 120, 200];

fn lease_of(lock: usize) -> i64 {
    LEASES_MS[lock % LEASES_MS.len()]
}

/// The earliest a lease granted by a command sent at `sent` (µs) can end:
/// the server counts it from when it ran the command, which is after it was
/// sent, in whole milliseconds of its clock, and a timeout key with 0 ms
/// left counts as gone.
fn lease_end(sent: i64, lease_ms: i64) -> i64 {
    (sent / 1000 + lease_ms) * 1000
}

/// Whether every acquisition of plain lock `lock` is fenced: half the
/// locks, of both kinds of name.
fn fenced_lock(lock: usize) -> bool {
    lock % 4 < 2
}

fn lock_name(lock: usize) -> String {
    if lock.is_multiple_of(2) {
        format!("t{lock}")
    } else {
        format!("{{t}}:{lock}")
    }
}

// ---------------------------------------------------------------------------
// The log and the checker
// ---------------------------------------------------------------------------

/// One interval in which `owner` may believe it holds `lock` (µs, wall clock).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Claim {
    lock: usize,
    owner: usize,
    write: bool,
    start: i64,
    end: i64,
}

/// A write claim overlapping a claim of another owner.
#[derive(Debug)]
struct Violation {
    write: Claim,
    other: Claim,
}

/// The independent checker: every pair of overlapping claims on one lock by
/// two owners where at least one claim is a write.
fn check(claims: &[Claim]) -> Vec<Violation> {
    let mut by_lock: BTreeMap<usize, Vec<Claim>> = BTreeMap::new();
    for c in claims.iter().filter(|c| c.start < c.end) {
        by_lock.entry(c.lock).or_default().push(*c);
    }
    let mut violations = Vec::new();
    for list in by_lock.values_mut() {
        list.sort_by_key(|c| (c.start, c.end));
        for (i, a) in list.iter().enumerate() {
            for b in &list[i + 1..] {
                if b.start >= a.end {
                    // Sorted by start: no later claim overlaps `a` either.
                    break;
                }
                if a.owner != b.owner && (a.write || b.write) {
                    let (write, other) = if a.write { (*a, *b) } else { (*b, *a) };
                    violations.push(Violation { write, other });
                }
            }
        }
    }
    violations
}

/// Pairs of overlapping read claims by different owners: shows that reads
/// were shared, so the exclusion proved is not the trivial one.
fn shared_reads(claims: &[Claim]) -> usize {
    let mut reads: Vec<&Claim> = claims
        .iter()
        .filter(|c| !c.write && c.start < c.end)
        .collect();
    reads.sort_by_key(|c| (c.lock, c.start));
    let mut n = 0;
    for (i, a) in reads.iter().enumerate() {
        for b in &reads[i + 1..] {
            if b.lock != a.lock || b.start >= a.end {
                break;
            }
            n += usize::from(a.owner != b.owner);
        }
    }
    n
}

/// A fenced acquisition as its client saw it: the token, when the command
/// was sent and answered (µs), and the interval the client then claimed,
/// as cut by its later commands (None when it could claim nothing).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
struct Grant {
    lock: usize,
    owner: usize,
    token: i64,
    sent: i64,
    recv: i64,
    held: Option<(i64, i64)>,
}

/// What the token checker went through, and what it found wrong.
#[derive(Debug, Default)]
struct TokenCheck {
    /// Pairs of successive holders compared, and those of two owners.
    successions: usize,
    handoffs: usize,
    violations: Vec<String>,
}

/// The second checker, from the client logs alone: on each lock, no token
/// twice; a grant answered before another was sent has the lower token
/// (the server ran it first); and ordered by the start of their claims,
/// successive holders' tokens strictly increase.
fn check_tokens(grants: &[Grant]) -> TokenCheck {
    let mut by_lock: BTreeMap<usize, Vec<Grant>> = BTreeMap::new();
    for g in grants {
        by_lock.entry(g.lock).or_default().push(*g);
    }
    let mut out = TokenCheck::default();
    for list in by_lock.values_mut() {
        list.sort_by_key(|g| g.token);
        for pair in list.windows(2).filter(|p| p[0].token == p[1].token) {
            out.violations.push(format!(
                "token given twice: {:?} and {:?}",
                pair[0], pair[1]
            ));
        }
        // From the highest token down, the earliest answer of any grant
        // with a higher token than the one at hand.
        let mut first_answer: Option<Grant> = None;
        for g in list.iter().rev() {
            if let Some(a) = first_answer.filter(|a| a.recv < g.sent && a.token > g.token) {
                out.violations.push(format!(
                    "{a:?} was answered before {g:?} was sent, with a higher token"
                ));
            }
            if first_answer.is_none_or(|a| g.recv < a.recv) {
                first_answer = Some(*g);
            }
        }
        let mut held: Vec<(i64, Grant)> = list
            .iter()
            .filter_map(|g| g.held.filter(|(s, e)| s < e).map(|(s, _)| (s, *g)))
            .collect();
        held.sort_by_key(|(start, _)| *start);
        for pair in held.windows(2) {
            let ((_, a), (_, b)) = (pair[0], pair[1]);
            out.successions += 1;
            out.handoffs += usize::from(a.owner != b.owner);
            if a.token >= b.token {
                out.violations.push(format!(
                    "successive holders' tokens do not increase: {a:?} then {b:?}"
                ));
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------
// A client
// ---------------------------------------------------------------------------

/// What one client believes it holds on one lock, and its open claims.
#[derive(Default)]
struct Holds {
    writes: i64,
    /// Claimable end of each read acquisition still held, first first. An
    /// end that has passed stays passed: that acquisition's timeout key may
    /// be gone, and a renewal does not bring it back.
    reads: Vec<i64>,
    write_end: i64,
    /// Latest time at which any key of ours on this lock can still exist.
    upper: i64,
    /// Holds we forgot may exist on the server until then: the client keeps
    /// away from the lock, so that what it believes and what the server has
    /// stay the same.
    quarantine: i64,
    /// Indices in the client's log of claims not yet cut.
    open_write: Vec<usize>,
    open_read: Vec<usize>,
}

impl Holds {
    fn held(&self) -> bool {
        self.writes > 0 || !self.reads.is_empty()
    }

    /// True when a hold may have ended on the server without us knowing: a
    /// write whose claim has passed, or reads whose every claim has.
    fn lapsed(&self, at: i64) -> bool {
        (self.writes > 0 && self.write_end <= at)
            || (!self.reads.is_empty() && self.reads.iter().all(|&end| end <= at))
    }
}

testkit::counters! {
    #[derive(Default, Debug, Clone)]
    struct Stats {
        ops, acquired, reentered, refused, blocked, block_granted, block_timed_out, renewed,
        renew_lost, unlocks, lapsed, lost_holds, abandoned, overslept, reentry_refused,
        deadlocks,
    }
}

/// What a client's run leaves: its claims, its commands, its counts and the
/// fenced acquisitions it made.
struct Record {
    claims: Vec<Claim>,
    history: Vec<Sent>,
    stats: Stats,
    grants: Vec<Grant>,
}

/// The error a plain lock's `NOREENTRY` re-acquire gets, which `send`
/// passes on as a reply.
const REENTRY_REFUSED: &str = "NON_REENTRANT_REACQUIRE";
/// A `BLOCK` acquisition whose wait would close a cycle (a client holding
/// one lock, its lease perhaps running out after it walked away, waits for
/// another whose holder waits for the first): refused, nothing changed
/// (contract §14).
const DEADLOCK: &str = "DEADLOCK";

/// One command as a client saw it, to explain a violation.
#[derive(Debug, Clone)]
#[allow(dead_code)] // Read through Debug, in violation reports.
struct Sent {
    owner: usize,
    lock: usize,
    args: String,
    sent: i64,
    recv: i64,
    reply: String,
}

struct Client {
    id: usize,
    owner: String,
    conn: Conn,
    rng: Rng,
    log: Vec<Claim>,
    history: Vec<Sent>,
    holds: Vec<Holds>,
    stats: Stats,
    budget: Arc<AtomicUsize>,
    stop: Arc<AtomicBool>,
    /// Plain locks (`LOCK.*`) instead of read-write ones.
    plain: bool,
    /// Fenced acquisitions, with the index of their claim in `log`.
    grants: Vec<(Grant, Option<usize>)>,
}

enum Kind {
    Read,
    Write,
}

/// One command's timing: when it was sent and answered, and whether a hold
/// of ours on its lock had lapsed when it was sent.
struct Timing {
    sent: i64,
    recv: i64,
    lapsed: bool,
}

impl Client {
    fn spent(&self) -> bool {
        self.stop.load(Ordering::Relaxed) || self.budget.load(Ordering::Relaxed) == 0
    }

    /// Sends one command on `lock`, timing it; None once the run's budget
    /// is spent.
    fn send(&mut self, lock: usize, args: &[String]) -> Option<(Value, Timing)> {
        let spent = self
            .budget
            .fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
        if self.stop.load(Ordering::Relaxed) || spent.is_err() {
            return None;
        }
        self.stats.ops += 1;
        let sent = wall_us();
        let lapsed = self.holds[lock].lapsed(sent);
        let reply = match testkit::call(&mut self.conn, args) {
            Ok(reply) => reply,
            // The one error a well-formed command of these runs may get.
            Err(e) if e.code() == Some(REENTRY_REFUSED) => {
                Value::SimpleString(REENTRY_REFUSED.to_string())
            }
            Err(e) if e.code() == Some(DEADLOCK) => Value::SimpleString(DEADLOCK.to_string()),
            Err(e) => panic!("{args:?}: {e}"),
        };
        let recv = wall_us();
        self.history.push(Sent {
            owner: self.id,
            lock,
            args: args[3..].join(" ") + " " + &args[0],
            sent,
            recv,
            reply: format!("{reply:?}"),
        });
        Some((reply, Timing { sent, recv, lapsed }))
    }

    fn claim(&mut self, lock: usize, write: bool, start: i64, end: i64) {
        if start >= end {
            return;
        }
        self.log.push(Claim {
            lock,
            owner: self.id,
            write,
            start,
            end,
        });
        let i = self.log.len() - 1;
        let h = &mut self.holds[lock];
        if write {
            h.open_write.push(i);
        } else {
            h.open_read.push(i);
        }
    }

    /// Stops claiming writes (or reads) on `lock` from `at` on.
    fn cut(&mut self, lock: usize, write: bool, at: i64) {
        let open = if write {
            std::mem::take(&mut self.holds[lock].open_write)
        } else {
            std::mem::take(&mut self.holds[lock].open_read)
        };
        for i in open {
            self.log[i].end = self.log[i].end.min(at);
        }
    }

    /// Forgets every hold on `lock` from `at` on, and keeps away from it
    /// until whatever the server may still have of ours there has expired.
    fn forget(&mut self, lock: usize, at: i64) {
        self.cut(lock, true, at);
        self.cut(lock, false, at);
        let h = &mut self.holds[lock];
        h.writes = 0;
        h.reads.clear();
        // A key is gone once the server's millisecond clock is past its
        // deadline.
        h.quarantine = h.upper + 2_000;
    }

    /// Our keys on `lock` may now live until `recv + lease`, or, for an
    /// additive write re-entry, a lease past what they had.
    fn extend_upper(&mut self, lock: usize, recv: i64, additive: bool) {
        let l = lease_of(lock) * 1000;
        let h = &mut self.holds[lock];
        let extended = if additive { h.upper + l } else { h.upper };
        h.upper = extended.max(recv + l);
    }

    /// The reply showed nothing, but a hold had lapsed when we sent: the
    /// server may hold less, or more, than we think.
    fn lapsed(&mut self, lock: usize, sent: i64) {
        self.stats.lapsed += 1;
        self.forget(lock, sent);
    }

    /// The arguments of an acquisition by `verb` of `lock` for its lease,
    /// waiting up to `block` ms on the server.
    fn acquisition(&mut self, verb: &str, lock: usize, block: Option<i64>) -> Vec<String> {
        let mut args = vec![
            verb.to_string(),
            lock_name(lock),
            self.owner.clone(),
            lease_of(lock).to_string(),
        ];
        if let Some(ms) = block {
            args.extend(["BLOCK".to_string(), ms.to_string()]);
            self.stats.blocked += 1;
        }
        args
    }

    fn acquire(&mut self, lock: usize, kind: Kind, block: Option<i64>) -> Option<()> {
        let l = lease_of(lock);
        let verb = match kind {
            Kind::Read => "RWLOCK.READ",
            Kind::Write => "RWLOCK.WRITE",
        };
        let args = self.acquisition(verb, lock, block);
        let (reply, t) = self.send(lock, &args)?;
        match reply {
            Value::Nil => {
                if block.is_some() {
                    self.stats.block_granted += 1;
                }
                if self.holds[lock].held() {
                    self.stats.reentered += 1;
                } else {
                    self.stats.acquired += 1;
                }
                self.extend_upper(lock, t.recv, matches!(kind, Kind::Write));
                if t.lapsed {
                    self.lapsed(lock, t.sent);
                    return Some(());
                }
                let end = lease_end(t.sent, l);
                match kind {
                    Kind::Read => {
                        self.holds[lock].reads.push(end);
                        self.claim(lock, false, t.recv, end);
                    }
                    Kind::Write => {
                        let h = &mut self.holds[lock];
                        // A re-entry adds the lease to what was left.
                        let end = if h.writes > 0 {
                            h.write_end + l * 1000
                        } else {
                            end
                        };
                        h.writes += 1;
                        h.write_end = end;
                        self.claim(lock, true, t.recv, end);
                    }
                }
            }
            Value::Int(_) => {
                if block.is_some() {
                    self.stats.block_timed_out += 1;
                }
                self.stats.refused += 1;
                if t.lapsed {
                    self.lapsed(lock, t.sent);
                }
            }
            Value::SimpleString(e) if e == DEADLOCK => self.deadlock(&args, block),
            other => panic!("{args:?} replied {other:?}"),
        }
        Some(())
    }

    fn renew(&mut self, lock: usize) -> Option<()> {
        let l = lease_of(lock);
        let verb = if self.plain {
            "LOCK.RENEW"
        } else {
            "RWLOCK.RENEW"
        };
        let args = vec![
            verb.to_string(),
            lock_name(lock),
            self.owner.clone(),
            l.to_string(),
        ];
        let (reply, t) = self.send(lock, &args)?;
        let end = lease_end(t.sent, l);
        match reply {
            Value::Int(1) => {
                self.stats.renewed += 1;
                self.extend_upper(lock, t.recv, false);
                if t.lapsed {
                    self.lapsed(lock, t.sent);
                    return Some(());
                }
                // The hash's deadline is set, not extended: a write hold
                // extended by re-entries may end sooner now.
                if self.holds[lock].writes > 0 {
                    self.cut(lock, true, t.sent);
                    self.holds[lock].write_end = end;
                    self.claim(lock, true, t.recv, end);
                }
                if !self.holds[lock].reads.is_empty() {
                    // Only timeout keys that still exist are renewed.
                    for r in &mut self.holds[lock].reads {
                        if *r > t.sent {
                            *r = end;
                        }
                    }
                    self.claim(lock, false, t.recv, end);
                }
            }
            Value::Int(0) => {
                self.stats.renew_lost += 1;
                self.stats.lost_holds += 1;
                self.forget(lock, t.sent);
            }
            other => panic!("{args:?} replied {other:?}"),
        }
        Some(())
    }

    /// Releases one hold of `kind`. A plain lock's hold is released as a
    /// write hold without reads is: `LOCK.UNLOCK` replies and re-arms the
    /// lease as `RWLOCK.UNLOCK … WRITE LEASE` does.
    fn unlock(&mut self, lock: usize, kind: Kind) -> Option<()> {
        let l = lease_of(lock);
        let verb = if self.plain {
            "LOCK.UNLOCK"
        } else {
            "RWLOCK.UNLOCK"
        };
        let mut args = vec![verb.to_string(), lock_name(lock), self.owner.clone()];
        match kind {
            Kind::Read => args.push("READ".into()),
            Kind::Write if self.plain => args.extend(["LEASE".to_string(), l.to_string()]),
            Kind::Write => args.extend(["WRITE".to_string(), "LEASE".to_string(), l.to_string()]),
        }
        let (reply, t) = self.send(lock, &args)?;
        self.stats.unlocks += 1;
        if t.lapsed {
            self.lapsed(lock, t.sent);
            return Some(());
        }
        let h = &self.holds[lock];
        let (writes, reads) = (h.writes, h.reads.len());
        match (kind, reply) {
            // Our last read released; 0 when others still hold the lock.
            (Kind::Read, Value::Int(0)) | (Kind::Read, Value::Int(1))
                if reads == 1 && writes == 0 =>
            {
                self.holds[lock].reads.clear();
                self.cut(lock, false, t.sent);
            }
            (Kind::Read, Value::Int(0)) => {
                self.holds[lock].reads.pop();
                self.cut(lock, false, t.sent);
                let longest = self.holds[lock].reads.iter().copied().max();
                if let Some(longest) = longest {
                    self.claim(lock, false, t.recv, longest);
                    // In write mode the hash now lives as long as our longest
                    // remaining read lease, which may be sooner than the
                    // write's end (with no read left its TTL is untouched).
                    if writes > 0 {
                        self.cut(lock, true, t.sent);
                        let end = self.holds[lock].write_end.min(longest);
                        self.holds[lock].write_end = end;
                        self.claim(lock, true, t.recv, end);
                    }
                }
            }
            (Kind::Write, Value::Int(0)) if writes > 1 => {
                self.extend_upper(lock, t.recv, false);
                self.holds[lock].writes -= 1;
                self.cut(lock, true, t.sent);
                let end = lease_end(t.sent, l);
                self.holds[lock].write_end = end;
                self.claim(lock, true, t.recv, end);
            }
            (Kind::Write, Value::Int(1)) if writes == 1 => {
                // Released, or downgraded to our reads with the TTL kept.
                self.holds[lock].writes = 0;
                self.cut(lock, true, t.sent);
            }
            _ => {
                // The server no longer has what we thought.
                self.stats.lost_holds += 1;
                self.forget(lock, t.sent);
            }
        }
        Some(())
    }

    /// One step of a client's random walk on `lock`.
    fn step(&mut self, lock: usize) -> Option<()> {
        let l = lease_of(lock);
        let now = wall_us();
        if self.holds[lock].lapsed(now) {
            // Slept past a lease: whatever is left expires on the server.
            self.lapsed(lock, now);
            return Some(());
        }
        if !self.holds[lock].held() {
            let block = self.rng.chance(30).then(|| self.rng.range(1, 3 * l));
            if self.plain {
                return self.take(lock, block);
            }
            let kind = if self.rng.chance(40) {
                Kind::Write
            } else {
                Kind::Read
            };
            return self.acquire(lock, kind, block);
        }
        let roll = self.rng.below(100);
        match roll {
            18..=27 => self.renew(lock)?,
            28..=29 => {
                // Walk away: the hold ends on the server when its lease does.
                self.stats.abandoned += 1;
                self.forget(lock, wall_us());
            }
            30..=32 => {
                self.stats.overslept += 1;
                thread::sleep(Duration::from_millis(self.rng.range(l, l + l / 2) as u64));
            }
            33..=52 => thread::sleep(Duration::from_micros(self.rng.range(0, 3000) as u64)),
            _ if self.plain => self.plain_step(lock, roll)?,
            _ => self.rwlock_step(lock, roll)?,
        }
        Some(())
    }

    /// A read-write lock's holder takes more, or lets go of some.
    fn rwlock_step(&mut self, lock: usize, roll: u64) -> Option<()> {
        let h = &self.holds[lock];
        let (writes, reads) = (h.writes, h.reads.len());
        match roll {
            0..=9 if reads < 4 => self.acquire(lock, Kind::Read, None),
            10..=17 if writes > 0 && writes < 4 => self.acquire(lock, Kind::Write, None),
            _ if reads > 0 && (writes == 0 || self.rng.chance(50)) => self.unlock(lock, Kind::Read),
            _ => self.unlock(lock, Kind::Write),
        }
    }

    /// A plain lock's holder re-enters it, or releases one hold.
    fn plain_step(&mut self, lock: usize, roll: u64) -> Option<()> {
        if roll < 18 && self.holds[lock].writes < 4 {
            self.take(lock, None)
        } else {
            self.unlock(lock, Kind::Write)
        }
    }

    /// A `DEADLOCK` refusal: only a request that would wait may get one,
    /// and it changed nothing, so nothing is claimed or forgotten.
    fn deadlock(&mut self, args: &[String], block: Option<i64>) {
        assert!(block.is_some(), "{args:?}: DEADLOCK without BLOCK");
        self.stats.deadlocks += 1;
    }

    /// `LOCK.ACQUIRE`, fenced on a fenced lock, with `NOREENTRY` at times
    /// (which a holder must be refused with its error).
    fn take(&mut self, lock: usize, block: Option<i64>) -> Option<()> {
        let l = lease_of(lock);
        let fenced = fenced_lock(lock);
        let no_reentry = self.rng.chance(20);
        let mut args = self.acquisition("LOCK.ACQUIRE", lock, block);
        args.extend(fenced.then(|| "FENCED".to_string()));
        args.extend(no_reentry.then(|| "NOREENTRY".to_string()));
        let held = self.holds[lock].held();
        let (reply, t) = self.send(lock, &args)?;
        // Some(token) when it took the lock (the token None unless fenced).
        let taken = match &reply {
            Value::Nil if !fenced => Some(None),
            Value::Int(_) if !fenced => None,
            Value::Array(_) if fenced => match fenced_pair(&reply) {
                (-1, token) => Some(Some(token)),
                _ => None,
            },
            Value::SimpleString(e) if e == DEADLOCK => {
                self.deadlock(&args, block);
                return Some(());
            }
            Value::SimpleString(e) if e == REENTRY_REFUSED => {
                // The server has a hold of ours; so must we, unless one lapsed.
                assert!(
                    held || t.lapsed,
                    "{args:?} refused as a re-entry of a lock we do not hold"
                );
                self.stats.reentry_refused += 1;
                if t.lapsed {
                    self.lapsed(lock, t.sent);
                }
                return Some(());
            }
            other => panic!("{args:?} replied {other:?}"),
        };
        let Some(token) = taken else {
            self.stats.refused += 1;
            self.stats.block_timed_out += usize::from(block.is_some());
            if held {
                // We held it, and it went: our hold had run out on the server.
                self.stats.lost_holds += usize::from(!t.lapsed);
                self.forget(lock, t.sent);
            }
            return Some(());
        };
        self.stats.block_granted += usize::from(block.is_some());
        let grant = Grant {
            lock,
            owner: self.id,
            token: token.unwrap_or(-1),
            sent: t.sent,
            recv: t.recv,
            held: None,
        };
        self.extend_upper(lock, t.recv, false);
        if t.lapsed || (held && no_reentry) {
            // A re-entry it should have refused: the server no longer had
            // our hold when it ran, so it may hold less, or more, than we think.
            self.stats.lost_holds += usize::from(!t.lapsed);
            self.lapsed(lock, t.sent);
            self.grants.extend(token.map(|_| (grant, None)));
            return Some(());
        }
        if held {
            self.stats.reentered += 1;
            // The TTL is set to the lease anew.
            self.cut(lock, true, t.sent);
        } else {
            self.stats.acquired += 1;
        }
        let end = lease_end(t.sent, l);
        let h = &mut self.holds[lock];
        h.writes += 1;
        h.write_end = end;
        let before = self.log.len();
        self.claim(lock, true, t.recv, end);
        let claimed = (self.log.len() > before).then_some(before);
        self.grants.extend(token.map(|_| (grant, claimed)));
        Some(())
    }

    fn run(mut self, locks: usize) -> Record {
        let mut lock = 0;
        loop {
            if !self.holds[lock].held() {
                // Another lock, out of quarantine.
                let now = wall_us();
                let free: Vec<usize> = (0..locks)
                    .filter(|&i| self.holds[i].quarantine <= now)
                    .collect();
                if free.is_empty() {
                    if self.spent() {
                        break;
                    }
                    thread::sleep(Duration::from_millis(1));
                    continue;
                }
                lock = *self.rng.pick(&free);
            }
            if self.step(lock).is_none() {
                break;
            }
        }
        // Each grant with its claim as later commands left it.
        let grants = self
            .grants
            .iter()
            .map(|(g, claim)| Grant {
                held: claim.map(|i| (self.log[i].start, self.log[i].end)),
                ..*g
            })
            .collect();
        Record {
            claims: self.log,
            history: self.history,
            stats: self.stats,
            grants,
        }
    }
}

// ---------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------

#[test]
fn checker_finds_overlaps_and_accepts_shared_reads() {
    let c = |owner, write, start, end| Claim {
        lock: 0,
        owner,
        write,
        start,
        end,
    };
    // Readers together, then a writer after them: fine.
    let fine = [
        c(1, false, 0, 10),
        c(2, false, 5, 15),
        c(3, true, 15, 20),
        c(3, false, 16, 25),
    ];
    assert!(check(&fine).is_empty());
    assert_eq!(shared_reads(&fine), 1);
    // A writer inside a reader's interval, and two overlapping writers.
    let bad = [
        c(1, false, 0, 10),
        c(2, true, 9, 12),
        c(3, true, 11, 30),
        c(4, false, 40, 50),
    ];
    let v = check(&bad);
    assert_eq!(v.len(), 2, "{v:?}");
    assert_eq!((v[0].write.owner, v[0].other.owner), (2, 1));
    assert_eq!((v[1].write.owner, v[1].other.owner), (2, 3));
    // Other locks and empty intervals never conflict.
    let mut other = c(5, true, 0, 100);
    other.lock = 1;
    assert!(check(&[c(1, true, 0, 10), other, c(6, true, 5, 5)]).is_empty());
}

#[test]
fn token_checker_finds_repeats_reorderings_and_decreases() {
    let g = |owner, token, sent, recv, held| Grant {
        lock: 0,
        owner,
        token,
        sent,
        recv,
        held,
    };
    // Three holders in turn, one re-entering; a grant answered late (a
    // waiter) whose claim is empty; another lock's tokens apart.
    let mut other = g(9, 1, 0, 1, Some((1, 100)));
    other.lock = 1;
    let fine = [
        g(1, 1, 0, 10, Some((10, 20))),
        g(1, 2, 15, 16, Some((16, 25))),
        g(2, 3, 5, 40, Some((40, 50))),
        g(3, 4, 12, 60, None),
        g(3, 5, 61, 62, Some((62, 70))),
        other,
    ];
    let ok = check_tokens(&fine);
    assert!(ok.violations.is_empty(), "{:?}", ok.violations);
    assert_eq!((ok.successions, ok.handoffs), (3, 2));
    // A token twice; a lower token sent after a higher one was answered;
    // a later holder with a lower token.
    let twice = check_tokens(&[g(1, 1, 0, 10, None), g(2, 1, 20, 30, None)]);
    assert_eq!(twice.violations.len(), 1, "{:?}", twice.violations);
    assert!(twice.violations[0].starts_with("token given twice"));
    let late = check_tokens(&[g(1, 2, 0, 10, None), g(2, 1, 20, 30, None)]);
    assert_eq!(late.violations.len(), 1, "{:?}", late.violations);
    assert!(late.violations[0].contains("answered before"));
    let down = check_tokens(&[
        g(1, 2, 0, 50, Some((50, 60))),
        g(2, 1, 0, 70, Some((70, 80))),
    ]);
    assert_eq!(down.violations.len(), 1, "{:?}", down.violations);
    assert!(down.violations[0].contains("do not increase"));
}

/// A run's size, from the environment.
struct Size {
    clients: usize,
    ops: usize,
    locks: usize,
    budget: Duration,
}

impl Size {
    fn from_env(default_ops: usize, default_locks: usize) -> Size {
        Size {
            clients: env_usize("RWLOCK_TORTURE_CLIENTS", 64),
            ops: env_usize("RWLOCK_TORTURE_OPS", default_ops),
            locks: env_usize("RWLOCK_TORTURE_LOCKS", default_locks),
            budget: Duration::from_secs(env_usize("RWLOCK_TORTURE_BUDGET_S", 120) as u64),
        }
    }
}

/// Every client's record of a run, merged, with the server it ran on.
struct Run {
    server: Server,
    claims: Vec<Claim>,
    grants: Vec<Grant>,
    stats: Stats,
}

/// Runs `size.clients` clients on read-write locks, or on plain ones
/// (`plain`), until `size.ops` operations are spent; checks mutual
/// exclusion, printing the commands around the first violations.
fn torture(size: &Size, plain: bool, default_seed: u64) -> Run {
    let Size {
        clients,
        ops,
        locks,
        budget,
    } = *size;
    let server = Server::start(&["--maxclients", "10000"]);
    let mut rng = Rng(seed(default_seed));
    let remaining = Arc::new(AtomicUsize::new(ops));
    let stop = Arc::new(AtomicBool::new(false));
    let started = Instant::now();
    let handles: Vec<_> = (0..clients)
        .map(|id| {
            let client = Client {
                id,
                owner: format!("c{id}:{}", rng.next_u64() % 1000),
                conn: server.conn(),
                rng: Rng(rng.next_u64()),
                log: Vec::new(),
                history: Vec::new(),
                holds: (0..locks).map(|_| Holds::default()).collect(),
                stats: Stats::default(),
                budget: Arc::clone(&remaining),
                stop: Arc::clone(&stop),
                plain,
                grants: Vec::new(),
            };
            thread::spawn(move || client.run(locks))
        })
        .collect();
    // The watchdog: a run that outlives its budget stops and fails.
    while !handles.iter().all(|h| h.is_finished()) && started.elapsed() < budget {
        thread::sleep(Duration::from_millis(20));
    }
    stop.store(true, Ordering::Relaxed);
    let mut claims = Vec::new();
    let mut history = Vec::new();
    let mut grants = Vec::new();
    let mut stats = Stats::default();
    for h in handles {
        let record = h.join().expect("a client panicked");
        claims.extend(record.claims);
        history.extend(record.history);
        grants.extend(record.grants);
        stats.add(&record.stats);
    }
    let elapsed = started.elapsed();
    let violations = check(&claims);
    let held_ms: i64 = claims.iter().map(|c| (c.end - c.start).max(0)).sum::<i64>() / 1000;
    let write_claims = claims.iter().filter(|c| c.write && c.start < c.end).count();
    let kind = if plain { "plain locks" } else { "locks" };
    eprintln!(
        "torture: {clients} clients, {locks} {kind}, leases {LEASES_MS:?} ms: {} operations in {:.1} s = {:.0} ops/s",
        stats.ops,
        elapsed.as_secs_f64(),
        stats.ops as f64 / elapsed.as_secs_f64()
    );
    eprintln!("torture: {stats:?}");
    eprintln!(
        "torture: {} claims ({write_claims} write), {held_ms} ms claimed in all; violations: {}",
        claims.len(),
        violations.len()
    );
    history.sort_by_key(|h| h.sent);
    for v in violations.iter().take(3) {
        eprintln!("VIOLATION {v:?}\n  the two owners' commands on the lock meanwhile:");
        let (from, to) = (
            v.other.start.min(v.write.start) - 300_000,
            v.write.end.max(v.other.end),
        );
        for h in history.iter().filter(|h| {
            h.lock == v.write.lock
                && (h.owner == v.write.owner || h.owner == v.other.owner)
                && h.recv >= from
                && h.sent <= to
        }) {
            eprintln!("    {h:?}");
        }
    }
    assert!(
        violations.is_empty(),
        "{} mutual exclusion violations",
        violations.len()
    );
    assert!(
        stats.ops >= ops,
        "only {} of {ops} operations within {budget:?}",
        stats.ops
    );
    assert!(stats.block_granted > 0 && stats.block_timed_out > 0 && stats.reentered > 0);
    assert!(stats.renewed > 0 && stats.lapsed > 0 && stats.refused > 0);
    let mut c = server.conn();
    assert_eq!(testkit::waiters(&mut c), 0, "waiters left parked");
    Run {
        server,
        claims,
        grants,
        stats,
    }
}

#[test]
fn torture_mutual_exclusion_from_client_logs() {
    let run = torture(&Size::from_env(100_000, 8), false, 0x7047_7E5E);
    let write_claims = run
        .claims
        .iter()
        .filter(|c| c.write && c.start < c.end)
        .count();
    let shared = shared_reads(&run.claims);
    eprintln!("torture: {shared} overlapping read pairs");
    // The run exercised what it claims to.
    assert!(
        write_claims > 100 && shared > 100,
        "too little contention to prove anything: {write_claims} write holds, {shared} \
         overlapping read pairs (with many clients per lock, readers keep it in read mode: \
         use more locks)"
    );
}

#[test]
fn torture_plain_locks_exclusion_and_fencing_tokens_from_client_logs() {
    // 16 locks: 4 clients a lock, where a plain lock hands over often.
    let size = Size::from_env(30_000, 16);
    let run = torture(&size, true, 0xF3_7C3D);
    let tokens = check_tokens(&run.grants);
    eprintln!(
        "torture: {} fenced acquisitions, {} successions of holders ({} between owners); token violations: {}",
        run.grants.len(),
        tokens.successions,
        tokens.handoffs,
        tokens.violations.len()
    );
    for v in tokens.violations.iter().take(5) {
        eprintln!("TOKEN VIOLATION {v}");
    }
    assert!(
        tokens.violations.is_empty(),
        "{} token violations",
        tokens.violations.len()
    );
    // Every grant's reply was read: each fenced lock handed out exactly
    // the tokens 1 to its counter, once each.
    let mut c = run.server.conn();
    for lock in (0..size.locks).filter(|&l| fenced_lock(l)) {
        let mut seen: Vec<i64> = run
            .grants
            .iter()
            .filter(|g| g.lock == lock)
            .map(|g| g.token)
            .collect();
        seen.sort_unstable();
        let counter = token_counter(&mut c, &lock_name(lock));
        assert!(
            seen.iter().copied().eq(1..=counter),
            "lock {lock}: counter {counter}, {} tokens seen",
            seen.len()
        );
    }
    let held = run.claims.iter().filter(|c| c.start < c.end).count();
    assert!(
        held > 100 && tokens.handoffs > 100 && run.stats.reentry_refused > 0,
        "too little happened to prove anything: {held} holds, {} handoffs between owners, {} refused re-entries",
        tokens.handoffs,
        run.stats.reentry_refused
    );
}
