//! Argument parsing for every command: arity, options, ranges and names are
//! checked here, before any key is touched. Parsing only sees bytes, so the
//! fuzz tests (tests/engine/args_fuzz.rs) run it without a server.

use redis_module::RedisError;

use crate::engine::error::{
    LockError, ERR_BLOCK_NOQUEUE, ERR_DUPLICATE, ERR_HELD_ACQUIRE, ERR_HELD_RELEASE, ERR_HOLDS,
    ERR_KIND, ERR_LEASE, ERR_REQUEST_ID, ERR_SYNTAX, ERR_TIMEOUT, ERR_TTL, ERR_WAIT,
    MAX_HOLDS_LISTED, MAX_MILLIS,
};
use crate::engine::hold::MAX_HOLDS;
use crate::engine::int::parse_i64;
use crate::engine::lock::Options;
use crate::engine::multi::Want;
use crate::engine::names::{check_owner, LockNames};
use crate::engine::queue::Hold;
use crate::engine::rwlock::{Mode, Request};
pub use crate::server::ArgString;

pub mod counts;
pub mod permits;

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

/// `lock owner lease` heading an acquisition of at most `most` arguments,
/// before its options are read.
fn acquisition_head<A: Arg>(args: &[A], most: usize) -> Result<Acquire<'_>, RedisError> {
    if args.len() < 4 || args.len() > most {
        return Err(RedisError::WrongArity);
    }
    Ok(Acquire {
        lock: owner_lease(&args[..4])?,
        block: None,
        session: false,
        request: None,
        held: None,
    })
}

/// `lock owner lease [BLOCK ms] [SESSION] [REQUEST id ttl] [HELD n]`: what
/// every acquisition takes (`HELD` only a lock's).
pub struct Acquire<'a> {
    pub lock: OwnerLease<'a>,
    /// How long to wait on the server; 0 waits without limit.
    pub block: Option<i64>,
    /// `SESSION`: the hold is bound to the calling connection.
    pub session: bool,
    /// `REQUEST id ttl`: an idempotent acquisition (docs/design.md §14.7).
    pub request: Option<Request<'a>>,
    /// `HELD n`: the owner's holds of the kind before the call, which tell
    /// a resend granted before (docs/design.md §14.8).
    pub held: Option<i64>,
}

/// `lock owner lease [BLOCK ms] [SESSION] [REQUEST id ttl] [HELD n]`:
/// RWLOCK.READ.
pub fn acquire<A: Arg>(args: &[A]) -> Result<Acquire<'_>, RedisError> {
    acquire_with(args, Flags::default()).map(|(a, _)| a)
}

/// The flags an acquisition command takes besides `BLOCK`, `SESSION` and
/// `REQUEST`.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Flags {
    /// `FENCED`: take a fencing token.
    pub fenced: bool,
    /// `NOREENTRY`: the holder may not take the lock again.
    pub non_reentrant: bool,
}

/// `lock owner lease [BLOCK ms] [SESSION] [REQUEST id ttl] [HELD n]` and, in
/// any order, the `flags` the command accepts, each at most once:
/// RWLOCK.WRITE (`FENCED`) and LOCK.ACQUIRE (`FENCED`, `NOREENTRY`).
pub fn acquire_with<A: Arg>(
    args: &[A],
    accepted: Flags,
) -> Result<(Acquire<'_>, Flags), RedisError> {
    let most = 12 + usize::from(accepted.fenced) + usize::from(accepted.non_reentrant);
    let mut parsed = acquisition_head(args, most)?;
    let mut flags = Flags::default();
    options(&args[4..], |word, rest| {
        Ok(if is(word, "SESSION") && !parsed.session {
            parsed.session = true;
            Some(1)
        } else if is(word, "FENCED") && accepted.fenced && !flags.fenced {
            flags.fenced = true;
            Some(1)
        } else if is(word, "NOREENTRY") && accepted.non_reentrant && !flags.non_reentrant {
            flags.non_reentrant = true;
            Some(1)
        } else if let Some(used) = held_option(word, rest, &mut parsed.held, ACQUIRED)? {
            Some(used)
        } else {
            wait_option(word, rest, &mut parsed.block, &mut parsed.request)?
        })
    })?;
    Ok((parsed, flags))
}

/// `BLOCK ms` or `REQUEST id ttl` heading `rest`, the options of every
/// acquisition that may wait, into `block` or `request` when not given yet:
/// how many arguments it used, None when `word` is neither.
fn wait_option<'a, A: Arg>(
    word: &[u8],
    rest: &'a [A],
    block: &mut Option<i64>,
    request: &mut Option<Request<'a>>,
) -> Result<Option<usize>, RedisError> {
    if is(word, "BLOCK") && block.is_none() && rest.len() >= 2 {
        *block = Some(millis(&rest[1], 0, ERR_TIMEOUT)?);
        return Ok(Some(2));
    }
    request_option(word, rest, request)
}

/// `REQUEST id ttl` heading `rest`, into `request` when not given yet: 3
/// (the arguments it used), None when `word` is not it.
fn request_option<'a, A: Arg>(
    word: &[u8],
    rest: &'a [A],
    request: &mut Option<Request<'a>>,
) -> Result<Option<usize>, RedisError> {
    Ok(
        if is(word, "REQUEST") && request.is_none() && rest.len() >= 3 {
            *request = Some(self::request(rest)?);
            Some(3)
        } else {
            None
        },
    )
}

/// The least `HELD n` of an acquisition (the owner held nothing before) and
/// of a release (it releases one of the holds it states).
const ACQUIRED: (i64, &str) = (0, ERR_HELD_ACQUIRE);
const RELEASED: (i64, &str) = (1, ERR_HELD_RELEASE);

/// `HELD n` heading `rest`, into `held` when not given yet: 2 (the
/// arguments it used), None when `word` is not it. `n` ranges from `least`
/// to `MAX_HOLDS`, else the error `least` comes with.
fn held_option<A: Arg>(
    word: &[u8],
    rest: &[A],
    held: &mut Option<i64>,
    (least, err): (i64, &'static str),
) -> Result<Option<usize>, RedisError> {
    if !(is(word, "HELD") && held.is_none() && rest.len() >= 2) {
        return Ok(None);
    }
    let n = parse_i64(rest[1].bytes())
        .filter(|n| (least..=MAX_HOLDS).contains(n))
        .ok_or(RedisError::Str(err))?;
    *held = Some(n);
    Ok(Some(2))
}

/// Options in any order: `take(word, rest)` takes the option whose keyword
/// `word` heads `rest` and says how many arguments it used, or None when it
/// takes no such option there (a syntax error).
fn options<'a, A: Arg>(
    mut rest: &'a [A],
    mut take: impl FnMut(&'a [u8], &'a [A]) -> Result<Option<usize>, RedisError>,
) -> Result<(), RedisError> {
    while let Some(first) = rest.first() {
        match take(first.bytes(), rest)? {
            Some(used) => rest = &rest[used..],
            None => return Err(RedisError::Str(ERR_SYNTAX)),
        }
    }
    Ok(())
}

/// `lock owner [LEASE ms] [REQUEST id ttl] [HELD n]`: LOCK.UNLOCK and
/// FAIRLOCK.UNLOCK.
pub struct LockUnlock<'a> {
    pub names: LockNames<'a>,
    pub owner: &'a [u8],
    pub lease: Option<i64>,
    pub request: Option<Request<'a>>,
    /// `HELD n`: the owner's holds before the call, which tell a resend
    /// done before (docs/design.md §14.8).
    pub held: Option<i64>,
}

pub fn lock_unlock<A: Arg>(args: &[A]) -> Result<LockUnlock<'_>, RedisError> {
    if args.len() < 3 {
        return Err(RedisError::WrongArity);
    }
    let (lease, request, held) = release_options(&args[3..])?;
    Ok(LockUnlock {
        names: names(&args[1])?,
        owner: owner(&args[2])?,
        lease,
        request,
        held,
    })
}

/// `REQUEST id ttl` at the head of `rest` (at least 3 arguments): a
/// non-empty id and a ttl from 1 ms.
fn request<A: Arg>(rest: &[A]) -> Result<Request<'_>, RedisError> {
    let id = rest[1].bytes();
    if id.is_empty() {
        return Err(RedisError::Str(ERR_REQUEST_ID));
    }
    let ttl = millis(&rest[2], 1, ERR_TTL)?;
    Ok(Request { id, ttl })
}

/// A release's `LEASE ms`, `REQUEST id ttl` and `HELD n`.
type ReleaseOptions<'a> = (Option<i64>, Option<Request<'a>>, Option<i64>);

/// `[LEASE ms] [REQUEST id ttl] [HELD n]`, in any order, each at most once.
fn release_options<A: Arg>(rest: &[A]) -> Result<ReleaseOptions<'_>, RedisError> {
    let (mut lease, mut request, mut held) = (None, None, None);
    options(rest, |word, rest| {
        if is(word, "LEASE") && lease.is_none() && rest.len() >= 2 {
            lease = Some(self::lease(&rest[1])?);
            return Ok(Some(2));
        }
        if let Some(used) = held_option(word, rest, &mut held, RELEASED)? {
            return Ok(Some(used));
        }
        request_option(word, rest, &mut request)
    })?;
    Ok((lease, request, held))
}

/// `lock owner READ|WRITE [LEASE ms] [REQUEST id ttl] [HELD n]`.
pub struct Unlock<'a> {
    pub names: LockNames<'a>,
    pub owner: &'a [u8],
    pub mode: Mode,
    pub lease: Option<i64>,
    pub request: Option<Request<'a>>,
    /// `HELD n`, as [`LockUnlock::held`].
    pub held: Option<i64>,
}

pub fn unlock<A: Arg>(args: &[A]) -> Result<Unlock<'_>, RedisError> {
    if args.len() < 4 {
        return Err(RedisError::WrongArity);
    }
    let names = names(&args[1])?;
    let owner = owner(&args[2])?;
    let mode = mode(&args[3])?;
    let (lease, request, held) = release_options(&args[4..])?;
    Ok(Unlock {
        names,
        owner,
        mode,
        lease,
        request,
        held,
    })
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

/// `lock owner lease [WAIT ms] [NOQUEUE] [NOREENTRY] [BLOCK ms] [REQUEST id
/// ttl] [HELD n]`: FAIRLOCK.ACQUIRE.
pub struct FairAcquire<'a> {
    /// The lock, `BLOCK ms` (waiting in the line on the server) and
    /// `REQUEST id ttl`; never `SESSION`.
    pub call: Acquire<'a>,
    /// Redisson's thread wait time; None: `rwlock.fair-wait`.
    pub wait: Option<i64>,
    /// `NOQUEUE`: `tryLock()` without wait, never joining the line.
    pub no_queue: bool,
    /// `NOREENTRY`: the non-reentrant fair lock.
    pub non_reentrant: bool,
}

/// `lock owner lease` then `WAIT ms`, `NOQUEUE`, `NOREENTRY`, `BLOCK ms`,
/// `REQUEST id ttl`, `HELD n` in any order, each at most once; `BLOCK` never with
/// `NOQUEUE`.
pub fn fair_acquire<A: Arg>(args: &[A]) -> Result<FairAcquire<'_>, RedisError> {
    let mut parsed = FairAcquire {
        call: acquisition_head(args, 15)?,
        wait: None,
        no_queue: false,
        non_reentrant: false,
    };
    options(&args[4..], |word, rest| {
        Ok(
            if is(word, "WAIT") && parsed.wait.is_none() && rest.len() >= 2 {
                parsed.wait = Some(millis(&rest[1], 0, ERR_WAIT)?);
                Some(2)
            } else if is(word, "NOQUEUE") && !parsed.no_queue {
                parsed.no_queue = true;
                Some(1)
            } else if is(word, "NOREENTRY") && !parsed.non_reentrant {
                parsed.non_reentrant = true;
                Some(1)
            } else if let Some(used) = held_option(word, rest, &mut parsed.call.held, ACQUIRED)? {
                Some(used)
            } else {
                let call = &mut parsed.call;
                wait_option(word, rest, &mut call.block, &mut call.request)?
            },
        )
    })?;
    if parsed.no_queue && parsed.call.block.is_some() {
        return Err(RedisError::Str(ERR_BLOCK_NOQUEUE));
    }
    Ok(parsed)
}

/// `lock owner [WAIT ms]`: FAIRLOCK.CANCEL; the wait None when not given.
pub fn fair_cancel<A: Arg>(args: &[A]) -> Result<(LockNames<'_>, &[u8], Option<i64>), RedisError> {
    match args {
        [_, lock, o] => Ok((names(lock)?, owner(o)?, None)),
        [_, lock, o, word, ms] if is(word.bytes(), "WAIT") => {
            Ok((names(lock)?, owner(o)?, Some(millis(ms, 0, ERR_WAIT)?)))
        }
        [_, _, _, _, _] => Err(RedisError::Str(ERR_SYNTAX)),
        _ => Err(RedisError::WrongArity),
    }
}

/// A multi-hold command: `owner [lease] [BLOCK ms] HOLDS n kind name …`.
pub struct Multi<'a> {
    pub owner: &'a [u8],
    /// ACQUIREALL and RENEWALL.
    pub lease: Option<i64>,
    /// ACQUIREALL: how long to wait on the server; 0 waits without limit.
    pub block: Option<i64>,
    /// ACQUIREALL: bind the holds to the calling connection.
    pub session: bool,
    /// The holds in the listed order, every name once.
    pub wants: Vec<Want<'a>>,
}

/// The multi-hold command parsed, which says what it takes before `HOLDS`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MultiCommand {
    /// `LOCK.ACQUIREALL owner lease [BLOCK ms] [SESSION]`.
    AcquireAll,
    /// `LOCK.UNLOCKALL owner`.
    UnlockAll,
    /// `LOCK.RENEWALL owner lease`.
    RenewAll,
}

impl MultiCommand {
    /// The arguments before its options: its name, the owner and, but for
    /// `LOCK.UNLOCKALL`, the lease.
    pub fn fixed(self) -> usize {
        2 + usize::from(self != MultiCommand::UnlockAll)
    }
}

/// `owner [lease] [options] HOLDS n kind name [kind name …]`: the options
/// (`BLOCK ms`, `SESSION`: `LOCK.ACQUIREALL`'s) in any order before
/// `HOLDS`, which ends them, each at most once.
pub fn multi<A: Arg>(args: &[A], command: MultiCommand) -> Result<Multi<'_>, RedisError> {
    let fixed = command.fixed();
    let options = command == MultiCommand::AcquireAll;
    if args.len() < fixed + 4 {
        return Err(RedisError::WrongArity);
    }
    let owner = owner(&args[1])?;
    let lease = if command == MultiCommand::UnlockAll {
        None
    } else {
        Some(lease(&args[2])?)
    };
    let mut rest = &args[fixed..];
    let mut block = None;
    let mut session = false;
    loop {
        let Some(word) = rest.first().map(Arg::bytes) else {
            return Err(RedisError::Str(ERR_SYNTAX));
        };
        if is(word, "HOLDS") {
            break;
        } else if is(word, "BLOCK") && options && block.is_none() && rest.len() >= 2 {
            block = Some(millis(&rest[1], 0, ERR_TIMEOUT)?);
            rest = &rest[2..];
        } else if is(word, "SESSION") && options && !session {
            session = true;
            rest = &rest[1..];
        } else {
            return Err(RedisError::Str(ERR_SYNTAX));
        }
    }
    let wants = holds(&rest[1..])?;
    Ok(Multi {
        owner,
        lease,
        block,
        session,
        wants,
    })
}

/// Where a multi-hold command's lock names are, found as its key spec
/// finds them: after the keyword `HOLDS` (searched from argument `from`) and
/// its count, every second argument; None when there is no such list.
pub fn hold_positions<A: Arg>(args: &[A], from: usize) -> Option<impl Iterator<Item = usize>> {
    let at = from
        + args
            .get(from..)?
            .iter()
            .position(|a| is(a.bytes(), "HOLDS"))?;
    let n = parse_i64(args.get(at + 1)?.bytes()).filter(|n| *n >= 0)?;
    let len = args.len();
    Some(
        (0..n as usize)
            .map(move |i| at + 3 + 2 * i)
            .take_while(move |&p| p < len),
    )
}

/// `n kind name [kind name …]`: n from 1 to `MAX_HOLDS_LISTED`, exactly n
/// pairs, each name once.
fn holds<A: Arg>(rest: &[A]) -> Result<Vec<Want<'_>>, RedisError> {
    let n = rest
        .first()
        .and_then(|n| parse_i64(n.bytes()))
        .filter(|n| (1..=MAX_HOLDS_LISTED).contains(n))
        .ok_or(RedisError::Str(ERR_HOLDS))?;
    let pairs = &rest[1..];
    if pairs.len() != 2 * n as usize {
        return Err(RedisError::Str(ERR_HOLDS));
    }
    let mut wants: Vec<Want> = Vec::with_capacity(n as usize);
    for pair in pairs.chunks_exact(2) {
        let word = pair[0].bytes();
        let hold = if is(word, "LOCK") {
            Hold::Lock(Options::default())
        } else if is(word, "READ") {
            Hold::Read
        } else if is(word, "WRITE") {
            Hold::Write { fenced: false }
        } else {
            return Err(RedisError::Str(ERR_KIND));
        };
        let names = names(&pair[1])?;
        if wants.iter().any(|w| w.names.hash() == names.hash()) {
            return Err(RedisError::Str(ERR_DUPLICATE));
        }
        wants.push(Want { names, hold });
    }
    Ok(wants)
}
