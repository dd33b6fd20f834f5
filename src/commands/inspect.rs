//! Commands that show what the server knows about waits (docs/design.md,
//! contract §14): the parked waiters of a lock (appended to `RWLOCK.INFO`
//! and `LOCK.INFO`), the locks waited for now (`LOCK.WAITING`) and the last
//! deadlocks found (`RWLOCK.DEADLOCKS`). Read-only and local to the node.

use redis_module::{Context, RedisError, RedisResult, RedisValue};

use crate::args::ArgString;
use crate::engine::error::ERR_SYNTAX;
use crate::engine::holders;
use crate::engine::int::parse_i64;
use crate::engine::kinds::Kind;
use crate::engine::names::LockNames;
use crate::engine::queue::Hold;
use crate::keyspace::RedisStore;
use crate::reply;
use crate::server;
use crate::sessions;
use crate::waiting::deadlock;
use crate::waiting::lines;
use crate::waiting::queues;

/// How many locks `LOCK.WAITING` lists without `COUNT`.
const WAITING_DEFAULT: usize = 10;

const ERR_COUNT: &str = "ERR COUNT must be an integer from 1 to 1000000";

fn label(s: &'static str) -> RedisValue {
    RedisValue::SimpleStringStatic(s)
}

fn hold_name(hold: Hold) -> &'static str {
    match hold {
        Hold::Read => "read",
        Hold::Write { .. } => "write",
        Hold::Lock(_) => "lock",
        Hold::Semaphore { .. } | Hold::Permit { .. } => "permits",
        Hold::Latch => "latch",
    }
}

fn kind_name(kind: Kind) -> &'static str {
    match kind {
        Kind::Read => "read",
        Kind::Write => "write",
        Kind::Lock => "lock",
        Kind::Permits | Kind::PermitIds => "permits",
    }
}

/// The `waiters` entry `RWLOCK.INFO` and `LOCK.INFO` end with: the lock's
/// parked clients in the order they will be served, each with `owner`,
/// `wants` (read, write or lock), `waited` (ms so far), `deadline` (Unix
/// ms its wait times out, nil without limit) and `client` (its id).
pub fn waiters(ctx: &Context, names: &LockNames) -> [RedisValue; 2] {
    let now = server::milliseconds();
    let shown = queues::waiters_of(ctx, names)
        .into_iter()
        .map(|w| {
            reply::record([
                ("owner", RedisValue::StringBuffer(w.owner)),
                ("wants", label(hold_name(w.hold))),
                ("waited", RedisValue::Integer((now - w.since).max(0))),
                (
                    "deadline",
                    w.deadline.map_or(RedisValue::Null, RedisValue::Integer),
                ),
                ("client", RedisValue::Integer(w.client as i64)),
            ])
        })
        .collect();
    [label("waiters"), RedisValue::Array(shown)]
}

/// The kind of lock a queue's first waiter waits for: `rwlock` for a read
/// or write hold, `lock` for the plain lock, `semaphore` for permits,
/// `latch` for a count-down latch's zero.
fn queue_kind(hold: Hold) -> &'static str {
    match hold {
        Hold::Read | Hold::Write { .. } => "rwlock",
        Hold::Lock(_) => "lock",
        Hold::Semaphore { .. } => "semaphore",
        Hold::Permit { .. } => "permit",
        Hold::Latch => "latch",
    }
}

/// `LOCK.WAITING [COUNT n]`
///
/// The locks clients wait for now, the longest-waiting first (at most `n`,
/// 10 without `COUNT`), each with `lock` (its name), `db`, `waiters` (how
/// many), `waited` (ms the earliest has waited), `holders` (each `owner`,
/// `kind` and `count`, read from the lock's hash; for a semaphore, its
/// session permits by connection) and `kind`: `rwlock`, `lock`,
/// `semaphore` or `latch` for clients queued with `BLOCK`, `fair` for clients parked in a
/// fair lock's line (`FAIRLOCK.ACQUIRE … BLOCK`). A name with both is
/// listed once for each.
pub fn waiting_locks(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let count = match args {
        [_] => WAITING_DEFAULT,
        [_, word, n] if word.bytes().eq_ignore_ascii_case(b"COUNT") => parse_i64(n.bytes())
            .filter(|n| (1..=1_000_000).contains(n))
            .ok_or(RedisError::Str(ERR_COUNT))?
            as usize,
        [_, _] | [_, _, _] => return Err(RedisError::Str(ERR_SYNTAX)),
        _ => return Err(RedisError::WrongArity),
    };
    let queued = queues::locks_waited_for()
        .into_iter()
        .map(|(id, n, since, hold)| (id, n, since, queue_kind(hold)));
    let in_line = lines::overview()
        .into_iter()
        .map(|(id, n, since)| (id, n, since, "fair"));
    let mut locks: Vec<_> = queued.chain(in_line).collect();
    locks.sort_by_key(|(id, _, since, kind)| (*since, id.clone(), *kind));
    locks.truncate(count);
    let now = server::milliseconds();
    let home = server::selected_db(ctx);
    let mut out = Vec::with_capacity(locks.len());
    for ((db, name), n, since, kind) in locks {
        // Each lock's holders are read in its own database; the caller's
        // is selected again below.
        server::select_db(ctx, db);
        let held = holders::all(&mut RedisStore::new(ctx), &name);
        let mut holders: Vec<RedisValue> = held
            .into_iter()
            .map(|(owner, kind, count)| {
                reply::record([
                    ("owner", RedisValue::StringBuffer(owner)),
                    ("kind", label(kind_name(kind))),
                    ("count", RedisValue::Integer(count)),
                ])
            })
            .collect();
        if kind == "semaphore" {
            holders.extend(session_permits(ctx, &name));
        }
        out.push(reply::record([
            ("lock", RedisValue::StringBuffer(name)),
            ("db", RedisValue::Integer(db.into())),
            ("waiters", RedisValue::Integer(n as i64)),
            ("waited", RedisValue::Integer((now - since).max(0))),
            ("holders", RedisValue::Array(holders)),
            ("kind", label(kind)),
        ]));
    }
    server::select_db(ctx, home);
    Ok(RedisValue::Array(out))
}

/// A semaphore's permits bound to connections (`SESSION`), one entry per
/// connection: no `owner` (permits have none), `kind` `permits`, `count`
/// and `client`, its id. Other permits taken are nobody's and not shown.
fn session_permits(ctx: &Context, name: &[u8]) -> Vec<RedisValue> {
    let Ok(names) = LockNames::new(name) else {
        return Vec::new();
    };
    sessions::permits_on(ctx, &names)
        .into_iter()
        .map(|(client, count)| {
            reply::record([
                ("owner", RedisValue::StringBuffer(Vec::new())),
                ("kind", label(kind_name(Kind::Permits))),
                ("count", RedisValue::Integer(count)),
                ("client", RedisValue::Integer(client as i64)),
            ])
        })
        .collect()
}

/// `RWLOCK.DEADLOCKS`
///
/// The last cycles of waits found (at most 16), the newest first, each as
/// `at` (Unix milliseconds) and `cycle` (the `DEADLOCK` error its victim
/// got, naming the owners and locks). Read-only, keyless, and local to the
/// node: nothing of it is replicated.
pub fn deadlocks(_ctx: &Context, args: &[ArgString]) -> RedisResult {
    if args.len() != 1 {
        return Err(RedisError::WrongArity);
    }
    Ok(RedisValue::Array(
        deadlock::recent()
            .into_iter()
            .map(|(at, text)| {
                reply::record([
                    ("at", RedisValue::Integer(at)),
                    ("cycle", RedisValue::BulkString(text)),
                ])
            })
            .collect(),
    ))
}
