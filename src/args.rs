//! Argument parsing for every command: arity, options, ranges and names are
//! checked here, before any key is touched. Parsing only sees bytes, so the
//! fuzz tests below run it without a server.

use redis_module::RedisError;

use crate::engine::error::{
    LockError, ERR_LEASE, ERR_REQUEST_ID, ERR_SYNTAX, ERR_TIMEOUT, ERR_TTL, MAX_MILLIS,
};
use crate::engine::int::parse_i64;
use crate::engine::names::{check_owner, LockNames};
use crate::engine::rwlock::{Mode, Request};
pub use crate::server::ArgString;

pub fn lock_error(e: LockError) -> RedisError {
    RedisError::Str(e.message())
}

/// A command argument: its bytes.
pub trait Arg {
    fn bytes(&self) -> &[u8];
}

impl Arg for ArgString {
    fn bytes(&self) -> &[u8] {
        ArgString::bytes(self)
    }
}

fn millis(arg: &impl Arg, min: i64, err: &'static str) -> Result<i64, RedisError> {
    parse_i64(arg.bytes())
        .filter(|ms| (min..=MAX_MILLIS).contains(ms))
        .ok_or(RedisError::Str(err))
}

pub fn lease(arg: &impl Arg) -> Result<i64, RedisError> {
    millis(arg, 1, ERR_LEASE)
}

pub fn names(arg: &impl Arg) -> Result<LockNames<'_>, RedisError> {
    LockNames::new(arg.bytes()).map_err(lock_error)
}

/// Whether an argument's bytes, fetched once by the caller (each fetch is a
/// call into Redis), are `keyword` in any case.
fn is(word: &[u8], keyword: &str) -> bool {
    word.eq_ignore_ascii_case(keyword.as_bytes())
}

fn mode(arg: &impl Arg) -> Result<Mode, RedisError> {
    let word = arg.bytes();
    if is(word, "READ") {
        Ok(Mode::Read)
    } else if is(word, "WRITE") {
        Ok(Mode::Write)
    } else {
        Err(RedisError::Str(ERR_SYNTAX))
    }
}

fn owner(arg: &impl Arg) -> Result<&[u8], RedisError> {
    let owner = arg.bytes();
    check_owner(owner).map_err(lock_error)?;
    Ok(owner)
}

/// `lock owner lease`: RENEW, and the start of READ and WRITE.
pub struct OwnerLease<'a> {
    pub names: LockNames<'a>,
    pub owner: &'a [u8],
    pub lease: i64,
}

pub fn owner_lease<A: Arg>(args: &[A]) -> Result<OwnerLease<'_>, RedisError> {
    let [_, lock, owner_arg, lease_arg] = args else {
        return Err(RedisError::WrongArity);
    };
    Ok(OwnerLease {
        names: names(lock)?,
        owner: owner(owner_arg)?,
        lease: lease(lease_arg)?,
    })
}

/// `lock owner lease [BLOCK ms]`: READ and WRITE.
pub struct Acquire<'a> {
    pub lock: OwnerLease<'a>,
    /// How long to wait on the server; 0 waits without limit.
    pub block: Option<i64>,
}

pub fn acquire<A: Arg>(args: &[A]) -> Result<Acquire<'_>, RedisError> {
    match args {
        [_, _, _, _] => Ok(Acquire {
            lock: owner_lease(args)?,
            block: None,
        }),
        [head @ .., option, ms] if head.len() == 4 => {
            let lock = owner_lease(head)?;
            if !is(option.bytes(), "BLOCK") {
                return Err(RedisError::Str(ERR_SYNTAX));
            }
            Ok(Acquire {
                lock,
                block: Some(millis(ms, 0, ERR_TIMEOUT)?),
            })
        }
        [_, _, _, _, _] => Err(RedisError::Str(ERR_SYNTAX)),
        _ => Err(RedisError::WrongArity),
    }
}

/// `lock owner READ|WRITE [LEASE ms] [REQUEST id ttl]`.
pub struct Unlock<'a> {
    pub names: LockNames<'a>,
    pub owner: &'a [u8],
    pub mode: Mode,
    pub lease: Option<i64>,
    pub request: Option<Request<'a>>,
}

pub fn unlock<A: Arg>(args: &[A]) -> Result<Unlock<'_>, RedisError> {
    if args.len() < 4 {
        return Err(RedisError::WrongArity);
    }
    let mut parsed = Unlock {
        names: names(&args[1])?,
        owner: owner(&args[2])?,
        mode: mode(&args[3])?,
        lease: None,
        request: None,
    };
    let mut rest = &args[4..];
    while let Some(option) = rest.first() {
        let option = option.bytes();
        if is(option, "LEASE") && parsed.lease.is_none() && rest.len() >= 2 {
            parsed.lease = Some(lease(&rest[1])?);
            rest = &rest[2..];
        } else if is(option, "REQUEST") && parsed.request.is_none() && rest.len() >= 3 {
            let id = rest[1].bytes();
            if id.is_empty() {
                return Err(RedisError::Str(ERR_REQUEST_ID));
            }
            let ttl = millis(&rest[2], 1, ERR_TTL)?;
            parsed.request = Some(Request { id, ttl });
            rest = &rest[3..];
        } else {
            return Err(RedisError::Str(ERR_SYNTAX));
        }
    }
    Ok(parsed)
}

/// `lock [READ|WRITE]`.
pub fn force_unlock<A: Arg>(args: &[A]) -> Result<(LockNames<'_>, Option<Mode>), RedisError> {
    match args {
        [_, lock] => Ok((names(lock)?, None)),
        [_, lock, m] => Ok((names(lock)?, Some(mode(m)?))),
        _ => Err(RedisError::WrongArity),
    }
}

/// `lock`.
pub fn lock_only<A: Arg>(args: &[A]) -> Result<LockNames<'_>, RedisError> {
    let [_, lock] = args else {
        return Err(RedisError::WrongArity);
    };
    names(lock)
}

#[cfg(test)]
mod fuzz;
