//! The count-down latch's commands, `LATCH.*`: Redisson's `RCountDownLatch`
//! on the same data as its scripts (docs/design.md, contract §16), and a
//! wait for zero on the server through the one acquisition driver.

use redis_module::{Context, RedisResult, RedisValue};

use super::apply::{acquire, change};
use super::docs::{
    arg, block, latch as latch_name, ArgKind, Command, FORCE_KEY, INFO_KEY, INSERT_KEY, LATCH_KEYS,
    RELEASE_KEY, V4,
};
use crate::args::{counts, lock_error, ArgString};
use crate::engine::latch;
use crate::engine::queue::Hold;
use crate::keyspace::RedisStore;

/// The latch's name, the one argument whose string the store reuses (as
/// the count's key).
fn name(args: &[ArgString]) -> &[ArgString] {
    args.get(1..2).unwrap_or_default()
}

/// `LATCH.TRYSETCOUNT name count`
///
/// Redisson's `trySetCount`: when no key has the name, sets the count and
/// publishes `1` on `redisson_countdownlatch__channel__{name}`; replies 1.
/// Replies 0 and changes nothing when the key exists.
pub fn try_set_count(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let (names, count) = counts::latch_count(args)?;
    let set = change(ctx, name(args), &names, |store| {
        Ok(latch::try_set_count(store, &names, count))
    })?;
    Ok(RedisValue::Integer(set.into()))
}

/// `LATCH.COUNTDOWN name`
///
/// Redisson's `countDown`: the count minus one; at zero the latch is
/// deleted, `0` is published and every `LATCH.AWAIT` waiter is answered 1.
/// Replies nil, as the script does.
pub fn count_down(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let names = counts::latch_only(args)?;
    change(ctx, name(args), &names, |store| {
        latch::count_down(store, &names)
    })?;
    Ok(RedisValue::Null)
}

/// `LATCH.COUNT name`
///
/// Redisson's `getCount`: the count, 0 when there is no latch. Read-only.
pub fn count(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let names = counts::latch_only(args)?;
    let mut store = RedisStore::new(ctx);
    let count = latch::count(&mut store, &names).map_err(lock_error)?;
    Ok(RedisValue::Integer(count))
}

/// `LATCH.DELETE name`
///
/// Redisson's `delete`: deletes the latch and publishes `1`; replies 1, or
/// 0 when there was none. Its waiters are answered 1, as when the count
/// reaches zero.
pub fn delete(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let names = counts::latch_only(args)?;
    let deleted = change(ctx, name(args), &names, |store| {
        latch::delete(store, &names)
    })?;
    Ok(RedisValue::Integer(deleted.into()))
}

/// `LATCH.AWAIT name [BLOCK ms]`
///
/// Redisson's `await`: replies 1 when the count is zero or the latch is
/// gone, else 0. With `BLOCK` the client waits on the server (0: without
/// limit) in the name's queue, and is answered 1 the moment the count
/// reaches zero or the latch goes (our count-down, a Redisson client's,
/// `DEL`, a flush, expiry), or 0 when its wait runs out.
pub fn await_zero(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let a = counts::latch_await(args)?;
    acquire(ctx, args, &a, Hold::Latch)
}

/// The count-down latch's commands (`RCountDownLatch`, contract §16).
pub(super) fn commands() -> Vec<Command> {
    let one = |name, entry, flags, summary, key| Command {
        name,
        entry,
        flags,
        summary,
        complexity: c"O(1)",
        since: V4,
        arity: 2,
        key,
        key_notes: LATCH_KEYS,
        args: vec![latch_name()],
    };
    vec![
        Command {
            arity: 3,
            args: vec![
                latch_name(),
                arg(c"count", ArgKind::Int, c"The count, from 0"),
            ],
            ..one(
                c"latch.trysetcount",
                entry!(try_set_count),
                c"write deny-oom",
                c"Sets a Redisson count-down latch's count (RCountDownLatch.trySetCount) when no key has its name and publishes 1. Replies 1 if set, else 0",
                INSERT_KEY,
            )
        },
        one(
            c"latch.countdown",
            entry!(count_down),
            c"write",
            c"Counts a latch down by one (countDown); at zero deletes it, publishes 0 and answers its waiters. Replies nil",
            RELEASE_KEY,
        ),
        one(
            c"latch.count",
            entry!(count),
            c"readonly",
            c"Replies a latch's count (getCount), 0 when there is none",
            INFO_KEY,
        ),
        one(
            c"latch.delete",
            entry!(delete),
            c"write",
            c"Deletes a latch (delete), publishes 1 and answers its waiters. Replies 1 if deleted, else 0",
            FORCE_KEY,
        ),
        Command {
            complexity: c"O(1), O(W) when the count reaches zero for W waiters",
            arity: -2,
            args: vec![latch_name(), block()],
            ..one(
                c"latch.await",
                entry!(await_zero),
                c"write blocking",
                c"Waits for a latch's count to reach zero (await). Replies 1 when it is zero or the latch is gone, else 0; BLOCK waits on the server",
                INFO_KEY,
            )
        },
    ]
}
