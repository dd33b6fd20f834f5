//! The count-down latch's commands, `LATCH.*`: Redisson's `RCountDownLatch`
//! on the same data as its scripts (docs/design.md, contract §16), and a
//! wait for zero on the server through the one acquisition driver.

use redis_module::{Context, RedisResult, RedisValue};

use super::apply::{acquire, change};
use crate::args::{self, lock_error, ArgString};
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
    let (names, count) = args::latch_count(args)?;
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
    let names = args::latch_only(args)?;
    change(ctx, name(args), &names, |store| {
        latch::count_down(store, &names)
    })?;
    Ok(RedisValue::Null)
}

/// `LATCH.COUNT name`
///
/// Redisson's `getCount`: the count, 0 when there is no latch. Read-only.
pub fn count(ctx: &Context, args: &[ArgString]) -> RedisResult {
    let names = args::latch_only(args)?;
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
    let names = args::latch_only(args)?;
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
    let a = args::latch_await(args)?;
    acquire(ctx, args, &a, Hold::Latch)
}
