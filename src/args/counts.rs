//! The semaphore's and the count-down latch's arguments (contract §15,
//! §16): counts of permits and of a latch, names, and the options every
//! acquisition shares, read with the parent's helpers.

use redis_module::RedisError;

use super::{
    is, lock_error, millis, names, options, request_option, wait_option, Acquire, Arg, OwnerLease,
    Request,
};
use crate::engine::error::{
    ERR_COUNT_ARG, ERR_PERMITS, ERR_PERMITS_COUNT, ERR_SEMAPHORE_TTL, ERR_SYNTAX, ERR_TIMEOUT,
};
use crate::engine::int::parse_i64;
use crate::engine::names::LockNames;

/// A number of permits to take or give back: 1 or more.
fn permits(arg: &impl Arg) -> Result<i64, RedisError> {
    parse_i64(arg.bytes())
        .filter(|n| *n >= 1)
        .ok_or(RedisError::Str(ERR_PERMITS))
}

/// A count to set or add: any 64-bit integer.
fn permits_count(arg: &impl Arg) -> Result<i64, RedisError> {
    parse_i64(arg.bytes()).ok_or(RedisError::Str(ERR_PERMITS_COUNT))
}

/// `name permits [BLOCK ms] [SESSION] [REQUEST id ttl]`: SEMAPHORE.ACQUIRE
/// (contract §15), as the acquisition the one driver takes, with the
/// permits. Permits have no owner and no lease: the owner is empty, the
/// lease 0, neither read by a semaphore's attempt.
pub fn semaphore_acquire<A: Arg>(args: &[A]) -> Result<(Acquire<'_>, i64), RedisError> {
    if args.len() < 3 || args.len() > 9 {
        return Err(RedisError::WrongArity);
    }
    let names = names(&args[1])?;
    let permits = permits(&args[2])?;
    Ok((unowned_acquisition(names, 0, &args[3..])?, permits))
}

/// An acquisition of permits, which have no owner (the owner is empty):
/// its names and `lease` already read, then `[BLOCK ms] [SESSION] [REQUEST id
/// ttl]` in `rest`, each at most once, in any order. SEMAPHORE.ACQUIRE's
/// and PERMIT.ACQUIRE's options.
pub(super) fn unowned_acquisition<'a, A: Arg>(
    names: LockNames<'a>,
    lease: i64,
    rest: &'a [A],
) -> Result<Acquire<'a>, RedisError> {
    let mut parsed = Acquire {
        lock: OwnerLease {
            names,
            owner: b"",
            lease,
        },
        block: None,
        session: false,
        request: None,
        held: None,
    };
    options(rest, |word, rest| {
        if is(word, "SESSION") && !parsed.session {
            parsed.session = true;
            return Ok(Some(1));
        }
        wait_option(word, rest, &mut parsed.block, &mut parsed.request)
    })?;
    Ok(parsed)
}

/// `name permits [IFEXISTS] [REQUEST id ttl]`: SEMAPHORE.RELEASE.
pub struct SemaphoreRelease<'a> {
    pub names: LockNames<'a>,
    pub permits: i64,
    /// `IFEXISTS`: nothing when there is no count (`releaseIfExists`).
    pub if_exists: bool,
    pub request: Option<Request<'a>>,
}

pub fn semaphore_release<A: Arg>(args: &[A]) -> Result<SemaphoreRelease<'_>, RedisError> {
    if args.len() < 3 || args.len() > 7 {
        return Err(RedisError::WrongArity);
    }
    let mut parsed = SemaphoreRelease {
        names: names(&args[1])?,
        permits: permits(&args[2])?,
        if_exists: false,
        request: None,
    };
    options(&args[3..], |word, rest| {
        if is(word, "IFEXISTS") && !parsed.if_exists {
            parsed.if_exists = true;
            return Ok(Some(1));
        }
        request_option(word, rest, &mut parsed.request)
    })?;
    Ok(parsed)
}

/// `name permits [TTL ms]`: SEMAPHORE.TRYSETPERMITS.
pub fn semaphore_try_set<A: Arg>(
    args: &[A],
) -> Result<(LockNames<'_>, i64, Option<i64>), RedisError> {
    let (lock, count, ttl) = match args {
        [_, lock, count] => (lock, count, None),
        [_, lock, count, word, ms] if is(word.bytes(), "TTL") => {
            (lock, count, Some(millis(ms, 1, ERR_SEMAPHORE_TTL)?))
        }
        [_, _, _, _, _] => return Err(RedisError::Str(ERR_SYNTAX)),
        _ => return Err(RedisError::WrongArity),
    };
    Ok((names(lock)?, permits_count(count)?, ttl))
}

/// `name n`: SEMAPHORE.ADDPERMITS.
pub fn semaphore_add<A: Arg>(args: &[A]) -> Result<(LockNames<'_>, i64), RedisError> {
    let [_, lock, n] = args else {
        return Err(RedisError::WrongArity);
    };
    Ok((names(lock)?, permits_count(n)?))
}

/// A count-down latch's name: its count's key (contract §16.1).
fn latch(arg: &impl Arg) -> Result<LockNames<'_>, RedisError> {
    crate::engine::latch::names(arg.bytes()).map_err(lock_error)
}

/// `name`: LATCH.COUNTDOWN, LATCH.COUNT, LATCH.DELETE.
pub fn latch_only<A: Arg>(args: &[A]) -> Result<LockNames<'_>, RedisError> {
    let [_, name] = args else {
        return Err(RedisError::WrongArity);
    };
    latch(name)
}

/// `name count`: LATCH.TRYSETCOUNT, the count from 0 (Java's
/// `CountDownLatch` takes no negative count either).
pub fn latch_count<A: Arg>(args: &[A]) -> Result<(LockNames<'_>, i64), RedisError> {
    let [_, name, count] = args else {
        return Err(RedisError::WrongArity);
    };
    let count = parse_i64(count.bytes())
        .filter(|n| *n >= 0)
        .ok_or(RedisError::Str(ERR_COUNT_ARG))?;
    Ok((latch(name)?, count))
}

/// `name [BLOCK ms]`: LATCH.AWAIT, as the one acquisition driver takes it:
/// no owner (a latch's waiter holds nothing), no lease.
pub fn latch_await<A: Arg>(args: &[A]) -> Result<Acquire<'_>, RedisError> {
    let block = match args {
        [_, _] => None,
        [_, _, word, ms] if is(word.bytes(), "BLOCK") => Some(millis(ms, 0, ERR_TIMEOUT)?),
        [_, _, _, _] => return Err(RedisError::Str(ERR_SYNTAX)),
        _ => return Err(RedisError::WrongArity),
    };
    Ok(Acquire {
        lock: OwnerLease {
            names: latch(&args[1])?,
            owner: b"",
            lease: 0,
        },
        block,
        session: false,
        request: None,
        held: None,
    })
}
