//! The permit-expirable semaphore's arguments (contract §17): permits,
//! leases that may be -1 (never expires), hex permit ids, read with the
//! parent's helpers.

use redis_module::RedisError;

use super::counts::unowned_acquisition;
use super::{millis, names, Acquire, Arg};
use crate::engine::error::{ERR_PERMITS_COUNT, ERR_PERMIT_COUNT, ERR_PERMIT_ID, ERR_PERMIT_LEASE};
use crate::engine::int::parse_i64;
use crate::engine::names::LockNames;
use crate::engine::permit::{self, MAX_PERMITS};

/// How many permits to take: 1 to `MAX_PERMITS`.
fn permits(arg: &impl Arg) -> Result<i64, RedisError> {
    parse_i64(arg.bytes())
        .filter(|n| (1..=MAX_PERMITS).contains(n))
        .ok_or(RedisError::Str(ERR_PERMIT_COUNT))
}

/// A permit's lease: -1 (it never expires, Redisson's `leaseTime` -1) or
/// 1 ms to ten years.
fn lease(arg: &impl Arg) -> Result<i64, RedisError> {
    if arg.bytes() == b"-1" {
        return Ok(-1);
    }
    millis(arg, 1, ERR_PERMIT_LEASE)
}

/// A permit id in hex: its bytes, as the set holds them.
fn id(arg: &impl Arg) -> Result<Vec<u8>, RedisError> {
    permit::parse_id(arg.bytes()).ok_or(RedisError::Str(ERR_PERMIT_ID))
}

/// `name permits lease [BLOCK ms] [SESSION] [REQUEST id ttl]`:
/// PERMIT.ACQUIRE, as the acquisition the one driver takes, with the
/// permits. Permits have no owner: the owner is empty; the lease is the
/// permits'. Each option at most once, in any order.
pub fn acquire<A: Arg>(args: &[A]) -> Result<(Acquire<'_>, i64), RedisError> {
    if args.len() < 4 || args.len() > 10 {
        return Err(RedisError::WrongArity);
    }
    let names = names(&args[1])?;
    let lease = lease(&args[3])?;
    let permits = permits(&args[2])?;
    Ok((unowned_acquisition(names, lease, &args[4..])?, permits))
}

/// `name id [id ...]`: PERMIT.RELEASE, at most `MAX_PERMITS` ids.
pub fn release<A: Arg>(args: &[A]) -> Result<(LockNames<'_>, Vec<Vec<u8>>), RedisError> {
    if args.len() < 3 || args.len() as i64 > MAX_PERMITS + 2 {
        return Err(RedisError::WrongArity);
    }
    let names = names(&args[1])?;
    let ids = args[2..].iter().map(id).collect::<Result<_, _>>()?;
    Ok((names, ids))
}

/// `name id`: PERMIT.TRYRELEASE and PERMIT.LEASETIME.
pub fn one_id<A: Arg>(args: &[A]) -> Result<(LockNames<'_>, Vec<u8>), RedisError> {
    let [_, name, permit] = args else {
        return Err(RedisError::WrongArity);
    };
    Ok((names(name)?, id(permit)?))
}

/// `name id lease`: PERMIT.UPDATELEASE.
pub fn update_lease<A: Arg>(args: &[A]) -> Result<(LockNames<'_>, Vec<u8>, i64), RedisError> {
    let [_, name, permit, ms] = args else {
        return Err(RedisError::WrongArity);
    };
    Ok((names(name)?, id(permit)?, lease(ms)?))
}

/// `name n`: PERMIT.TRYSETPERMITS, PERMIT.SETPERMITS, PERMIT.ADDPERMITS;
/// any 64-bit integer.
pub fn count<A: Arg>(args: &[A]) -> Result<(LockNames<'_>, i64), RedisError> {
    let [_, name, n] = args else {
        return Err(RedisError::WrongArity);
    };
    let names = names(name)?;
    let n = parse_i64(n.bytes()).ok_or(RedisError::Str(ERR_PERMITS_COUNT))?;
    Ok((names, n))
}
