//! How the engine's outcomes read as replies, the same whether a command
//! answers at once or a parked client is answered later.

use redis_module::RedisValue;

use crate::engine::hold::Attempt;
use crate::engine::permit::{self, NO_EXPIRY};
use crate::engine::queue::Hold;

/// Whether the acquisition takes a fencing token, which changes its reply.
pub fn fenced(hold: Hold) -> bool {
    match hold {
        Hold::Read | Hold::Latch => false,
        Hold::Write { fenced } => fenced,
        Hold::Lock(options) => options.fenced,
        Hold::Semaphore { .. } | Hold::Permit { .. } => false,
    }
}

/// An acquisition's reply, as Redisson's scripts give it: nil when taken,
/// else the lock's PTTL; fenced, `[-1, token]` or `[pttl, -1]`; a
/// semaphore's 1 or 0. A latch's wait replies as Redisson's
/// `await(timeout)` returns: 1 when the count is zero (or the latch gone),
/// 0 when not.
pub fn attempt(attempt: Attempt, hold: Hold) -> RedisValue {
    if let Hold::Permit { permits, seed } = hold {
        return permits_reply(attempt, permits, seed);
    }
    // As Redisson's semaphore script: 1 taken, 0 not.
    if matches!(hold, Hold::Semaphore { .. } | Hold::Latch) {
        return RedisValue::Integer(matches!(attempt, Attempt::Granted(_)).into());
    }
    match (attempt, fenced(hold)) {
        (Attempt::Granted(_), false) => RedisValue::Null,
        (Attempt::Refused { pttl }, false) => RedisValue::Integer(pttl),
        (Attempt::Granted(granted), true) => RedisValue::Array(vec![
            RedisValue::Integer(-1),
            RedisValue::Integer(granted.token.unwrap_or(-1)),
        ]),
        (Attempt::Refused { pttl }, true) => {
            RedisValue::Array(vec![RedisValue::Integer(pttl), RedisValue::Integer(-1)])
        }
    }
}

/// A permit acquisition's reply (contract §17): the ids taken, in hex as
/// Redisson's Java shows them, where the script replies `OK`; refused, the
/// lowest expiry held (the script's `:<score>`, as an integer), or nil.
fn permits_reply(attempt: Attempt, permits: i64, seed: [u64; 2]) -> RedisValue {
    match attempt {
        Attempt::Granted(_) => RedisValue::Array(
            permit::ids(seed, permits)
                .map(|id| RedisValue::StringBuffer(permit::hex(&id)))
                .collect(),
        ),
        Attempt::Refused { pttl: NO_EXPIRY } => RedisValue::Null,
        Attempt::Refused { pttl: at } => RedisValue::Integer(at),
    }
}

/// An unlock's reply: nil, 0 or 1.
pub fn release(reply: Option<i64>) -> RedisValue {
    reply.map_or(RedisValue::Null, RedisValue::Integer)
}

/// The fields of a record as the info commands reply them: each value after
/// its label, flat, the same in RESP2 and RESP3.
pub fn fields<const N: usize>(
    fields: [(&'static str, RedisValue); N],
) -> impl Iterator<Item = RedisValue> {
    fields
        .into_iter()
        .flat_map(|(label, value)| [RedisValue::SimpleStringStatic(label), value])
}

/// A record of [`fields`].
pub fn record<const N: usize>(fields: [(&'static str, RedisValue); N]) -> RedisValue {
    RedisValue::Array(self::fields(fields).collect())
}
