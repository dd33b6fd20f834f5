//! Fuzz tests of argument parsing (proptest). Argument vectors are
//! arbitrary bytes, biased towards the tokens that matter (options, numbers
//! at the edges of their ranges, names with braces, reserved owners), and
//! are checked against a reference written from the contract (docs/design.md), not from the
//! parser: a call is accepted exactly when the reference finds no problem,
//! with the same values, and a refused call reports one of the problems the
//! reference found. `PROPTEST_CASES` sets the number of cases (`make fuzz`
//! runs many more); failures are kept in `proptest-regressions/`.

use std::collections::BTreeSet;

use proptest::prelude::*;
use redis_module::RedisError;

use crate::fuzz_cases::cases;
use ::rwlock::args::{
    acquire, fair_acquire, fair_cancel, force_unlock, lock_only, owner_lease, unlock, Arg,
};
use ::rwlock::engine::error::{
    ERR_BLOCK_NOQUEUE, ERR_LEASE, ERR_OWNER, ERR_REQUEST_ID, ERR_SPREAD_NAME, ERR_SYNTAX,
    ERR_TIMEOUT, ERR_TTL, ERR_WAIT,
};
use ::rwlock::engine::names::LockNames;
use ::rwlock::engine::rwlock::Mode;

/// An argument as the fuzzer makes it (the product's `Arg` is the server's string).
struct Bytes(Vec<u8>);

impl Arg for Bytes {
    fn bytes(&self) -> &[u8] {
        &self.0
    }
}

/// What can be wrong with a call.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Problem {
    Arity,
    Syntax,
    Name,
    Owner,
    Lease,
    Timeout,
    RequestId,
    Ttl,
    Wait,
    /// `BLOCK` with `NOQUEUE` (FAIRLOCK.ACQUIRE).
    BlockNoQueue,
}

fn problem_of(e: &RedisError) -> Problem {
    match e {
        RedisError::WrongArity => Problem::Arity,
        RedisError::Str(m) if *m == ERR_SYNTAX => Problem::Syntax,
        RedisError::Str(m) if *m == ERR_SPREAD_NAME => Problem::Name,
        RedisError::Str(m) if *m == ERR_OWNER => Problem::Owner,
        RedisError::Str(m) if *m == ERR_LEASE => Problem::Lease,
        RedisError::Str(m) if *m == ERR_TIMEOUT => Problem::Timeout,
        RedisError::Str(m) if *m == ERR_REQUEST_ID => Problem::RequestId,
        RedisError::Str(m) if *m == ERR_TTL => Problem::Ttl,
        RedisError::Str(m) if *m == ERR_WAIT => Problem::Wait,
        RedisError::Str(m) if *m == ERR_BLOCK_NOQUEUE => Problem::BlockNoQueue,
        other => panic!("an error no call should give: {other:?}"),
    }
}

// ---------------------------------------------------------------------------
// The reference, from the contract
// ---------------------------------------------------------------------------

const MAX_MS: i64 = 315_360_000_000;

/// An integer as Redis writes them: an optional `-`, digits, no leading zero.
fn ref_int(b: &[u8]) -> Option<i64> {
    let text = std::str::from_utf8(b).ok()?;
    let digits = text.strip_prefix('-').unwrap_or(text);
    let canonical = !digits.is_empty()
        && digits.bytes().all(|c| c.is_ascii_digit())
        && (!digits.starts_with('0') || text == "0");
    if canonical {
        text.parse().ok()
    } else {
        None
    }
}

/// Milliseconds from `min` to ten years.
fn ref_millis(b: &[u8], min: i64) -> Option<i64> {
    ref_int(b).filter(|n| (min..=MAX_MS).contains(n))
}

/// The part of a key Redis Cluster hashes.
fn cluster_tag(key: &[u8]) -> &[u8] {
    let Some(open) = key.iter().position(|&c| c == b'{') else {
        return key;
    };
    match key[open + 1..].iter().position(|&c| c == b'}') {
        Some(0) | None => key,
        Some(len) => &key[open + 1..open + 1 + len],
    }
}

/// contract §1's prefix and suffix rules.
fn ref_prefix(p: &[u8], name: &[u8]) -> Vec<u8> {
    if name.contains(&b'{') {
        [p, b":", name].concat()
    } else {
        [p, b":{", name, b"}"].concat()
    }
}

fn ref_suffix_base(name: &[u8]) -> Vec<u8> {
    if name.contains(&b'{') {
        name.to_vec()
    } else {
        [b"{", name, b"}"].concat()
    }
}

/// Every key and channel contract §1 derives from `name`, for owners and request
/// ids that probe the brace rule.
fn ref_derived(name: &[u8]) -> Vec<Vec<u8>> {
    let mut keys = vec![ref_prefix(b"redisson_rwlock", name)];
    for tail in [&b"o"[..], b"}", b"{", b"{}", b"a}b", b"{x}"] {
        let base = ref_suffix_base(name);
        keys.push([&base[..], b":", tail, b":rwlock_timeout:1"].concat());
        keys.push([&ref_prefix(b"redisson_unlock_latch", name)[..], b":", tail].concat());
    }
    keys
}

/// contract §6: a name is refused when a key derived from it could land in
/// another slot than the name itself.
fn ref_name_ok(name: &[u8]) -> bool {
    let tag = cluster_tag(name);
    ref_derived(name).iter().all(|k| cluster_tag(k) == tag)
}

/// contract §1: an owner is non-empty, not `mode`, and does not end in `:write`.
fn ref_owner_ok(owner: &[u8]) -> bool {
    !owner.is_empty() && owner != b"mode" && !owner.ends_with(b":write")
}

fn word(b: &[u8], w: &str) -> bool {
    b.eq_ignore_ascii_case(w.as_bytes())
}

fn ref_mode(b: &[u8]) -> Option<Mode> {
    if word(b, "READ") {
        Some(Mode::Read)
    } else if word(b, "WRITE") {
        Some(Mode::Write)
    } else {
        None
    }
}

/// Collects problems; `None` values stand for a problem already noted.
#[derive(Default)]
struct Check(BTreeSet<Problem>);

impl Check {
    fn need<T>(&mut self, value: Option<T>, problem: Problem) -> Option<T> {
        if value.is_none() {
            self.0.insert(problem);
        }
        value
    }

    fn name(&mut self, b: &[u8]) -> Option<Vec<u8>> {
        self.need(ref_name_ok(b).then(|| b.to_vec()), Problem::Name)
    }

    fn owner(&mut self, b: &[u8]) -> Option<Vec<u8>> {
        self.need(ref_owner_ok(b).then(|| b.to_vec()), Problem::Owner)
    }

    fn done<T>(self, value: Option<T>) -> Result<T, BTreeSet<Problem>> {
        match value {
            Some(v) if self.0.is_empty() => Ok(v),
            _ => Err(self.0),
        }
    }
}

fn only(p: Problem) -> BTreeSet<Problem> {
    [p].into()
}

type RefAcquire = (
    Vec<u8>,
    Vec<u8>,
    i64,
    Option<i64>,
    bool,
    Option<(Vec<u8>, i64)>,
);

/// `lock owner lease [BLOCK ms] [SESSION] [REQUEST id ttl]`, options in any
/// order, each at most once.
fn ref_acquire(a: &[Vec<u8>]) -> Result<RefAcquire, BTreeSet<Problem>> {
    if !(4..=10).contains(&a.len()) {
        return Err(only(Problem::Arity));
    }
    let mut c = Check::default();
    let name = c.name(&a[1]);
    let owner = c.owner(&a[2]);
    let lease = c.need(ref_millis(&a[3], 1), Problem::Lease);
    let (mut block, mut block_ok, mut session) = (None, true, false);
    let (mut request, mut request_ok) = (None, true);
    let mut i = 4;
    while i < a.len() {
        if word(&a[i], "BLOCK") && block.is_none() && block_ok && i + 1 < a.len() {
            block = c.need(ref_millis(&a[i + 1], 0), Problem::Timeout);
            block_ok = block.is_some();
            i += 2;
        } else if word(&a[i], "SESSION") && !session {
            session = true;
            i += 1;
        } else if word(&a[i], "REQUEST") && request.is_none() && request_ok && i + 2 < a.len() {
            let id = c.need(
                (!a[i + 1].is_empty()).then(|| a[i + 1].clone()),
                Problem::RequestId,
            );
            let ttl = c.need(ref_millis(&a[i + 2], 1), Problem::Ttl);
            request = id.zip(ttl);
            request_ok = request.is_some();
            i += 3;
        } else {
            c.0.insert(Problem::Syntax);
            break;
        }
    }
    let all = (|| Some((name?, owner?, lease?, block, session, request)))();
    c.done(all)
}

type RefFair = (
    Vec<u8>,
    Vec<u8>,
    i64,
    Option<i64>,
    bool,
    bool,
    Option<i64>,
    Option<(Vec<u8>, i64)>,
);

/// `lock owner lease [WAIT ms] [NOQUEUE] [NOREENTRY] [BLOCK ms] [REQUEST id
/// ttl]`, options in any order, each at most once, `BLOCK` never with
/// `NOQUEUE` (contract §13.3).
fn ref_fair_acquire(a: &[Vec<u8>]) -> Result<RefFair, BTreeSet<Problem>> {
    if !(4..=13).contains(&a.len()) {
        return Err(only(Problem::Arity));
    }
    let mut c = Check::default();
    let name = c.name(&a[1]);
    let owner = c.owner(&a[2]);
    let lease = c.need(ref_millis(&a[3], 1), Problem::Lease);
    let (mut wait, mut wait_ok, mut no_queue, mut no_reentry) = (None, true, false, false);
    let (mut block, mut block_ok) = (None, true);
    let (mut request, mut request_ok) = (None, true);
    let mut i = 4;
    while i < a.len() {
        if word(&a[i], "WAIT") && wait.is_none() && wait_ok && i + 1 < a.len() {
            wait = c.need(ref_millis(&a[i + 1], 0), Problem::Wait);
            wait_ok = wait.is_some();
            i += 2;
        } else if word(&a[i], "BLOCK") && block.is_none() && block_ok && i + 1 < a.len() {
            block = c.need(ref_millis(&a[i + 1], 0), Problem::Timeout);
            block_ok = block.is_some();
            i += 2;
        } else if word(&a[i], "NOQUEUE") && !no_queue {
            no_queue = true;
            i += 1;
        } else if word(&a[i], "NOREENTRY") && !no_reentry {
            no_reentry = true;
            i += 1;
        } else if word(&a[i], "REQUEST") && request.is_none() && request_ok && i + 2 < a.len() {
            let id = c.need(
                (!a[i + 1].is_empty()).then(|| a[i + 1].clone()),
                Problem::RequestId,
            );
            let ttl = c.need(ref_millis(&a[i + 2], 1), Problem::Ttl);
            request = id.zip(ttl);
            request_ok = request.is_some();
            i += 3;
        } else {
            c.0.insert(Problem::Syntax);
            break;
        }
    }
    if c.0.is_empty() && no_queue && block.is_some() {
        c.0.insert(Problem::BlockNoQueue);
    }
    let all = (|| {
        Some((
            name?, owner?, lease?, wait, no_queue, no_reentry, block, request,
        ))
    })();
    c.done(all)
}

type RefCancel = (Vec<u8>, Vec<u8>, Option<i64>);

/// `lock owner [WAIT ms]`.
fn ref_fair_cancel(a: &[Vec<u8>]) -> Result<RefCancel, BTreeSet<Problem>> {
    if a.len() != 3 && a.len() != 5 {
        return Err(only(Problem::Arity));
    }
    let mut c = Check::default();
    let name = c.name(&a[1]);
    let owner = c.owner(&a[2]);
    let wait = match a.get(3) {
        None => Some(None),
        Some(w) if word(w, "WAIT") => c.need(ref_millis(&a[4], 0), Problem::Wait).map(Some),
        Some(_) => c.need(None, Problem::Syntax),
    };
    let all = (|| Some((name?, owner?, wait?)))();
    c.done(all)
}

/// `lock owner lease`.
fn ref_owner_lease(a: &[Vec<u8>]) -> Result<(Vec<u8>, Vec<u8>, i64), BTreeSet<Problem>> {
    if a.len() != 4 {
        return Err(only(Problem::Arity));
    }
    let mut c = Check::default();
    let name = c.name(&a[1]);
    let owner = c.owner(&a[2]);
    let lease = c.need(ref_millis(&a[3], 1), Problem::Lease);
    let all = (|| Some((name?, owner?, lease?)))();
    c.done(all)
}

type RefUnlock = (Vec<u8>, Vec<u8>, Mode, Option<i64>, Option<(Vec<u8>, i64)>);

/// `lock owner READ|WRITE [LEASE ms] [REQUEST id ttl]`, options in either
/// order, each at most once.
fn ref_unlock(a: &[Vec<u8>]) -> Result<RefUnlock, BTreeSet<Problem>> {
    if a.len() < 4 {
        return Err(only(Problem::Arity));
    }
    let mut c = Check::default();
    let name = c.name(&a[1]);
    let owner = c.owner(&a[2]);
    let mode = c.need(ref_mode(&a[3]), Problem::Syntax);
    let (mut lease, mut request) = (None, None);
    let (mut lease_ok, mut request_ok) = (true, true);
    let mut i = 4;
    while i < a.len() {
        if word(&a[i], "LEASE") && lease.is_none() && lease_ok && i + 1 < a.len() {
            lease = c.need(ref_millis(&a[i + 1], 1), Problem::Lease);
            lease_ok = lease.is_some();
            i += 2;
        } else if word(&a[i], "REQUEST") && request.is_none() && request_ok && i + 2 < a.len() {
            let id = c.need(
                (!a[i + 1].is_empty()).then(|| a[i + 1].clone()),
                Problem::RequestId,
            );
            let ttl = c.need(ref_millis(&a[i + 2], 1), Problem::Ttl);
            request = id.zip(ttl);
            request_ok = request.is_some();
            i += 3;
        } else {
            c.0.insert(Problem::Syntax);
            break;
        }
    }
    let all = (|| Some((name?, owner?, mode?, lease, request)))();
    c.done(all)
}

/// `lock [READ|WRITE]`.
fn ref_force_unlock(a: &[Vec<u8>]) -> Result<(Vec<u8>, Option<Mode>), BTreeSet<Problem>> {
    let mut c = Check::default();
    let all = match a.len() {
        2 => c.name(&a[1]).map(|n| (n, None)),
        3 => {
            let name = c.name(&a[1]);
            let mode = c.need(ref_mode(&a[2]), Problem::Syntax);
            name.zip(mode.map(Some))
        }
        _ => return Err(only(Problem::Arity)),
    };
    c.done(all)
}

/// `lock`.
fn ref_lock_only(a: &[Vec<u8>]) -> Result<Vec<u8>, BTreeSet<Problem>> {
    if a.len() != 2 {
        return Err(only(Problem::Arity));
    }
    let mut c = Check::default();
    let name = c.name(&a[1]);
    c.done(name)
}

// ---------------------------------------------------------------------------
// Comparing the parser with the reference
// ---------------------------------------------------------------------------

/// The parser accepts exactly what the reference accepts, with the values
/// `same` compares, and refuses for a reason the reference found.
fn agree<T, R: std::fmt::Debug>(
    argv: &[Vec<u8>],
    parsed: Result<T, RedisError>,
    reference: Result<R, BTreeSet<Problem>>,
    same: impl Fn(&T, &R) -> bool,
) -> Result<(), TestCaseError> {
    let shown: Vec<String> = argv.iter().map(|a| a.escape_ascii().to_string()).collect();
    match (parsed, reference) {
        (Ok(p), Ok(r)) => prop_assert!(same(&p, &r), "{shown:?}: parsed differently from {r:?}"),
        (Ok(_), Err(problems)) => {
            prop_assert!(
                false,
                "{shown:?}: accepted, but the reference finds {problems:?}"
            )
        }
        (Err(e), Ok(r)) => prop_assert!(false, "{shown:?}: refused ({e:?}), reference {r:?}"),
        (Err(e), Err(problems)) => {
            let p = problem_of(&e);
            prop_assert!(
                problems.contains(&p),
                "{shown:?}: reported {p:?}, the reference finds {problems:?}"
            );
        }
    }
    Ok(())
}

fn check_all(argv: &[Vec<u8>]) -> Result<(), TestCaseError> {
    let args: Vec<Bytes> = argv.iter().map(|a| Bytes(a.clone())).collect();
    agree(argv, acquire(&args), ref_acquire(argv), |p, r| {
        (
            p.lock.names.hash(),
            p.lock.owner,
            p.lock.lease,
            p.block,
            p.session,
            p.request.map(|q| (q.id.to_vec(), q.ttl)),
        ) == (&r.0[..], &r.1[..], r.2, r.3, r.4, r.5.clone())
    })?;
    agree(argv, owner_lease(&args), ref_owner_lease(argv), |p, r| {
        (p.names.hash(), p.owner, p.lease) == (&r.0[..], &r.1[..], r.2)
    })?;
    agree(argv, unlock(&args), ref_unlock(argv), |p, r| {
        let request = p.request.map(|q| (q.id.to_vec(), q.ttl));
        (p.names.hash(), p.owner, p.mode, p.lease, request)
            == (&r.0[..], &r.1[..], r.2, r.3, r.4.clone())
    })?;
    agree(argv, force_unlock(&args), ref_force_unlock(argv), |p, r| {
        (p.0.hash(), p.1) == (&r.0[..], r.1)
    })?;
    agree(argv, fair_acquire(&args), ref_fair_acquire(argv), |p, r| {
        (
            p.call.lock.names.hash(),
            p.call.lock.owner,
            p.call.lock.lease,
            p.wait,
            p.no_queue,
            p.non_reentrant,
            p.call.block,
            p.call.request.map(|q| (q.id.to_vec(), q.ttl)),
        ) == (&r.0[..], &r.1[..], r.2, r.3, r.4, r.5, r.6, r.7.clone())
    })?;
    agree(argv, fair_cancel(&args), ref_fair_cancel(argv), |p, r| {
        (p.0.hash(), p.1, p.2) == (&r.0[..], &r.1[..], r.2)
    })?;
    agree(argv, lock_only(&args), ref_lock_only(argv), |p, r| {
        p.hash() == &r[..]
    })
}

// ---------------------------------------------------------------------------
// Inputs
// ---------------------------------------------------------------------------

const WORDS: &[&str] = &[
    "READ",
    "WRITE",
    "read",
    "Write",
    "BLOCK",
    "block",
    "LEASE",
    "lease",
    "REQUEST",
    "Request",
    "SESSION",
    "session",
    "FOO",
    "",
    "READ\0",
    " READ",
    "WAIT",
    "wait",
    "NOQUEUE",
    "NoReentry",
];
const NUMBERS: &[&str] = &[
    "0",
    "1",
    "30000",
    "315360000000",
    "315360000001",
    "-1",
    "-0",
    "01",
    "+5",
    " 5",
    "5 ",
    "1.5",
    "1e3",
    "9223372036854775807",
    "9223372036854775808",
    "-9223372036854775808",
    "0x10",
];
const NAMES: &[&str] = &[
    "L", "{t}:a", "x{t}y", "a{b", "{}", "{}x", "}", "{", "a}b", "{t}}", "{a}{b", "", "mode",
];
const OWNERS: &[&str] = &[
    "u:1", "mode", "MODE", "u:write", ":write", "u:writer", "write",
];

fn pick(list: &'static [&'static str]) -> impl Strategy<Value = Vec<u8>> {
    prop::sample::select(list).prop_map(|s| s.as_bytes().to_vec())
}

fn token() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        3 => pick(WORDS),
        3 => pick(NUMBERS),
        2 => any::<i64>().prop_map(|n| n.to_string().into_bytes()),
        2 => (0..=MAX_MS + 2).prop_map(|n| n.to_string().into_bytes()),
        3 => pick(NAMES),
        3 => pick(OWNERS),
        2 => prop::collection::vec(any::<u8>(), 0..12),
        1 => prop::collection::vec(
            prop::sample::select(&b"{}:ab0-"[..]),
            0..8,
        ),
    ]
}

/// A call: a command name, then up to 9 arguments, often shaped like a real
/// call (a name, an owner, a number, then options).
fn argv() -> impl Strategy<Value = Vec<Vec<u8>>> {
    let shaped = (
        pick(NAMES),
        pick(OWNERS),
        prop_oneof![pick(NUMBERS), pick(WORDS)],
        prop::collection::vec(token(), 0..6),
    )
        .prop_map(|(n, o, x, rest)| {
            let mut v = vec![b"RWLOCK.X".to_vec(), n, o, x];
            v.extend(rest);
            v
        });
    let loose = prop::collection::vec(token(), 0..9).prop_map(|rest| {
        let mut v = vec![b"RWLOCK.X".to_vec()];
        v.extend(rest);
        v
    });
    prop_oneof![shaped, loose]
}

/// Names made of the characters the brace rule cares about.
fn name() -> impl Strategy<Value = Vec<u8>> {
    prop::collection::vec(
        prop_oneof![
            3 => prop::sample::select(&b"{}"[..]),
            2 => prop::sample::select(&b"ab:"[..]),
            1 => any::<u8>(),
        ],
        0..10,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(cases(3000)))]

    #[test]
    fn parsing_agrees_with_the_reference(argv in argv()) {
        check_all(&argv)?;
    }

    #[test]
    fn accepted_names_keep_every_derived_key_in_their_slot(
        name in name(),
        owner in prop::collection::vec(any::<u8>(), 1..6),
        id in prop::collection::vec(any::<u8>(), 1..6),
        n in 1i64..100_001,
    ) {
        let accepted = LockNames::new(&name);
        prop_assert_eq!(accepted.is_ok(), ref_name_ok(&name), "{:?}", name.escape_ascii().to_string());
        if let Ok(names) = accepted {
            let tag = cluster_tag(&name);
            let (timeout_key, latch_key) = (names.timeout_key(&owner, n), names.latch_key(&id));
            let channel = names.channel();
            prop_assert_eq!(cluster_tag(&timeout_key), tag);
            prop_assert_eq!(cluster_tag(&latch_key), tag);
            prop_assert_eq!(cluster_tag(&channel), tag);
            let (queue, line_timeout) = (names.fair_queue(), names.fair_timeout());
            let waiter = names.waiter_channel(&owner);
            prop_assert_eq!(cluster_tag(&queue), tag);
            prop_assert_eq!(cluster_tag(&line_timeout), tag);
            prop_assert_eq!(cluster_tag(&waiter), tag);
        }
    }
}

/// Inputs kept because they once mattered or sit on an edge; run every time.
#[test]
fn corpus() {
    let corpus: &[&[&str]] = &[
        &["RWLOCK.READ", "L", "u:1", "30000"],
        &["RWLOCK.READ", "L", "u:1", "30000", "BLOCK", "0"],
        &["RWLOCK.READ", "L", "u:1", "30000", "block", "315360000000"],
        &["RWLOCK.READ", "L", "u:1", "30000", "BLOCK"],
        &["RWLOCK.READ", "L", "u:1", "30000", "BLOCK", "-1"],
        &[
            "RWLOCK.READ",
            "L",
            "u:1",
            "1",
            "REQUEST",
            "r",
            "1",
            "BLOCK",
            "0",
            "SESSION",
        ],
        &["RWLOCK.READ", "L", "u:1", "1", "REQUEST", "r"],
        &["RWLOCK.READ", "L", "u:1", "1", "REQUEST", "", "1"],
        &["RWLOCK.READ", "L", "u:1", "1", "REQUEST", "r", "0"],
        &[
            "RWLOCK.READ",
            "L",
            "u:1",
            "1",
            "REQUEST",
            "r",
            "1",
            "REQUEST",
            "r",
        ],
        &["RWLOCK.READ", "L", "u:1", "0"],
        &["RWLOCK.READ", "L", "u:1", "315360000001"],
        &["RWLOCK.READ", "a{b", "mode", "x"],
        &["RWLOCK.READ", "{}x", "u:1", "1"],
        &["RWLOCK.READ", "{t}}", "u:1", "1"],
        &[
            "RWLOCK.UNLOCK",
            "L",
            "u:1",
            "READ",
            "LEASE",
            "1",
            "REQUEST",
            "r",
            "1",
        ],
        &[
            "RWLOCK.UNLOCK",
            "L",
            "u:1",
            "WRITE",
            "REQUEST",
            "r",
            "1",
            "LEASE",
            "1",
        ],
        &[
            "RWLOCK.UNLOCK",
            "L",
            "u:1",
            "WRITE",
            "LEASE",
            "1",
            "LEASE",
            "1",
        ],
        &["RWLOCK.UNLOCK", "L", "u:1", "WRITE", "REQUEST", "", "1"],
        &[
            "RWLOCK.UNLOCK",
            "L",
            "u:1",
            "WRITE",
            "REQUEST",
            "LEASE",
            "5",
        ],
        &["RWLOCK.UNLOCK", "L", "u:1", "BOTH"],
        &["RWLOCK.UNLOCK", "L", "u:write", "READ"],
        &["RWLOCK.FORCEUNLOCK", "L", "read"],
        &["RWLOCK.FORCEUNLOCK", "L", "READ", "x"],
        &["RWLOCK.INFO", "{a}{b"],
        &["RWLOCK.INFO"],
        &["RWLOCK.RENEW", "L", "u:1", "-0"],
    ];
    for call in corpus {
        let argv: Vec<Vec<u8>> = call.iter().map(|s| s.as_bytes().to_vec()).collect();
        if let Err(e) = check_all(&argv) {
            panic!("{e}");
        }
    }
}

/// The multi-hold grammar: options before `HOLDS`, the count, the pairs,
/// and where the names are for the key spec's report.
mod multi_holds {
    use super::{Arg, Bytes};
    use ::rwlock::args::{hold_positions, multi, MultiCommand};
    use ::rwlock::engine::error::{ERR_DUPLICATE, ERR_HOLDS, ERR_KIND, ERR_SYNTAX, ERR_TIMEOUT};
    use ::rwlock::engine::queue::Hold;
    use redis_module::RedisError;

    const ACQUIRE: MultiCommand = MultiCommand::AcquireAll;
    const UNLOCK: MultiCommand = MultiCommand::UnlockAll;

    fn argv(line: &str) -> Vec<Bytes> {
        line.split(' ')
            .map(|w| Bytes(w.as_bytes().to_vec()))
            .collect()
    }

    fn error(line: &str, form: MultiCommand) -> String {
        match multi(&argv(line), form) {
            Err(RedisError::Str(e)) => e.to_string(),
            Err(RedisError::WrongArity) => "arity".to_string(),
            Err(e) => format!("{e:?}"),
            Ok(_) => "accepted".to_string(),
        }
    }

    #[test]
    fn a_well_formed_call_lists_its_holds_in_order() {
        let line = argv("X o:1 500 block 20 HOLDS 3 lock a READ {t}b write c");
        let a = multi(&line, ACQUIRE).expect("accepted");
        assert_eq!(a.owner, b"o:1");
        assert_eq!((a.lease, a.block), (Some(500), Some(20)));
        let kinds: Vec<Hold> = a.wants.iter().map(|w| w.hold).collect();
        assert_eq!(
            kinds,
            [
                Hold::Lock(Default::default()),
                Hold::Read,
                Hold::Write { fenced: false }
            ]
        );
        let names: Vec<&[u8]> = a.wants.iter().map(|w| w.names.hash()).collect();
        assert_eq!(names, [&b"a"[..], b"{t}b", b"c"]);
        let line = argv("X o:1 HOLDS 1 LOCK a");
        let u = multi(&line, UNLOCK).expect("accepted");
        assert_eq!((u.lease, u.block), (None, None));
    }

    #[test]
    fn every_malformed_call_gets_its_error() {
        let cases = [
            ("X o:1 500 HOLDS 1 LOCK", "arity"),
            ("X o:1 500 HOLDS 0 LOCK a", ERR_HOLDS),
            ("X o:1 500 HOLDS 101 LOCK a", ERR_HOLDS),
            ("X o:1 500 HOLDS x LOCK a", ERR_HOLDS),
            ("X o:1 500 HOLDS 2 LOCK a", ERR_HOLDS),
            ("X o:1 500 HOLDS 1 LOCK a READ b", ERR_HOLDS),
            ("X o:1 500 HOLDS 1 FENCED a", ERR_KIND),
            ("X o:1 500 HOLDS 2 LOCK a READ a", ERR_DUPLICATE),
            ("X o:1 500 BLOCK -1 HOLDS 1 LOCK a", ERR_TIMEOUT),
            ("X o:1 500 BLOCK 1 BLOCK 1 HOLDS 1 LOCK a", ERR_SYNTAX),
            ("X o:1 500 FENCED HOLDS 1 LOCK a", ERR_SYNTAX),
            ("X o:1 500 1 LOCK a READ b", ERR_SYNTAX),
        ];
        for (line, expected) in cases {
            assert_eq!(error(line, ACQUIRE), expected, "{line}");
        }
        assert_eq!(error("X o:1 BLOCK 1 HOLDS 1 LOCK a", UNLOCK), ERR_SYNTAX);
        assert_eq!(
            error("X o:1 500 HOLDS 1 LOCK a{", ACQUIRE),
            ::rwlock::engine::error::ERR_SPREAD_NAME
        );
    }

    #[test]
    fn key_positions_follow_holds_and_its_count() {
        let a = argv("X HOLDS 500 BLOCK 1 HOLDS 2 LOCK a READ b");
        let found: Vec<usize> = hold_positions(&a, 3).expect("a list").collect();
        assert_eq!(found, [8, 10], "the owner spelled HOLDS is no keyword");
        assert_eq!(a[8].bytes(), b"a");
        let short = argv("X o:1 HOLDS 3 LOCK a READ");
        let found: Vec<usize> = hold_positions(&short, 2).expect("a list").collect();
        assert_eq!(found, [5], "positions stop at the last argument");
        assert!(hold_positions(&argv("X o:1 500"), 3).is_none());
    }
}
