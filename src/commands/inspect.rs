//! Commands that show what the server knows about waits (docs/design.md,
//! contract §14): the last deadlocks found.

use redis_module::{Context, RedisError, RedisResult, RedisValue};

use crate::args::ArgString;
use crate::waiting::deadlock;

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
    let label = RedisValue::SimpleStringStatic;
    Ok(RedisValue::Array(
        deadlock::recent()
            .into_iter()
            .map(|(at, text)| {
                RedisValue::Array(vec![
                    label("at"),
                    RedisValue::Integer(at),
                    label("cycle"),
                    RedisValue::BulkString(text),
                ])
            })
            .collect(),
    ))
}
