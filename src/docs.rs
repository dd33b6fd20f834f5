//! What `COMMAND DOCS` and `COMMAND INFO` tell about each command: summary,
//! complexity, debut version, arity, the lock key's spec and the arguments,
//! given to Redis with `RedisModule_SetCommandInfo` (Redis 7.0+). Clients
//! such as redis-cli 7.2+ build their argument hints from these docs.

use std::ffi::CStr;
use std::os::raw::c_int;
use std::ptr;

use redis_module::{raw, Context};

/// The module version in which every command below first appeared.
const SINCE: &CStr = c"0.1.0";

/// The kinds of argument the commands take.
enum Kind {
    /// The lock name: the command's one declared key.
    Key,
    Str,
    Int,
    /// A keyword standing alone, such as `READ`.
    Token(&'static CStr),
    /// Exactly one of the alternatives.
    OneOf(Vec<Arg>),
    /// A keyword followed by its values, such as `REQUEST id ttl`.
    Block(Vec<Arg>),
}

struct Arg {
    name: &'static CStr,
    kind: Kind,
    /// The keyword in front of the value (`BLOCK ms`); None for positional.
    token: Option<&'static CStr>,
    optional: bool,
    summary: &'static CStr,
}

fn arg(name: &'static CStr, kind: Kind, summary: &'static CStr) -> Arg {
    Arg {
        name,
        kind,
        token: None,
        optional: false,
        summary,
    }
}

fn optional(token: &'static CStr, mut arg: Arg) -> Arg {
    arg.token = Some(token);
    arg.optional = true;
    arg
}

/// An optional `KEYWORD milliseconds`, named as Redis's own commands name
/// such values (`SET … PX milliseconds`), which is what hints show.
fn millis(token: &'static CStr, summary: &'static CStr) -> Arg {
    optional(token, arg(c"milliseconds", Kind::Int, summary))
}

fn lock() -> Arg {
    arg(
        c"lock",
        Kind::Key,
        c"The lock's name: its hash key, as Redisson names it",
    )
}

fn owner() -> Arg {
    arg(
        c"owner",
        Kind::Str,
        c"Who holds the lock: Redisson's '<client UUID>:<thread id>'",
    )
}

fn lease() -> Arg {
    arg(
        c"lease",
        Kind::Int,
        c"Milliseconds the hold lasts unless renewed",
    )
}

fn block() -> Arg {
    millis(
        c"BLOCK",
        c"Wait on the server up to this many milliseconds (0: no limit)",
    )
}

fn mode_choice(summary: &'static CStr) -> Arg {
    arg(
        c"mode",
        Kind::OneOf(vec![
            arg(c"read", Kind::Token(c"READ"), c"A read hold"),
            arg(c"write", Kind::Token(c"WRITE"), c"The write hold"),
        ]),
        summary,
    )
}

/// Key spec flags (`REDISMODULE_CMD_KEY_*`) of the lock key, chosen as for
/// Redis's own hash commands: acquiring and renewing read the holds and update
/// counts and TTLs (as HINCRBY: RW ACCESS UPDATE); an unlock may delete the
/// lock (RW ACCESS DELETE); a forced unlock deletes it returning nothing of
/// it (RW DELETE); RWLOCK.INFO only reads (RO ACCESS).
struct KeyFlags(u32);

const ACQUIRE_KEY: KeyFlags = KeyFlags(
    raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_ACCESS | raw::REDISMODULE_CMD_KEY_UPDATE,
);
const RELEASE_KEY: KeyFlags = KeyFlags(
    raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_ACCESS | raw::REDISMODULE_CMD_KEY_DELETE,
);
const FORCE_KEY: KeyFlags = KeyFlags(raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_DELETE);
const INFO_KEY: KeyFlags = KeyFlags(raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS);

struct Doc {
    name: &'static CStr,
    summary: &'static CStr,
    complexity: &'static CStr,
    /// Redis's convention: N exactly, -N at least N (the name included).
    arity: c_int,
    key: KeyFlags,
    args: Vec<Arg>,
}

fn docs() -> Vec<Doc> {
    let acquire_complexity = c"O(1), O(W) when the lock is released to W waiters";
    vec![
        Doc {
            name: c"rwlock.read",
            summary: c"Takes a read hold of a Redisson read-write lock. Replies nil when held, else the lock's PTTL",
            complexity: acquire_complexity,
            arity: -4,
            key: ACQUIRE_KEY,
            args: vec![lock(), owner(), lease(), block()],
        },
        Doc {
            name: c"rwlock.write",
            summary: c"Takes the write hold of a Redisson read-write lock. Replies nil when held, else the lock's PTTL",
            complexity: acquire_complexity,
            arity: -4,
            key: ACQUIRE_KEY,
            args: vec![lock(), owner(), lease(), block()],
        },
        Doc {
            name: c"rwlock.unlock",
            summary: c"Releases one hold. Replies nil (nothing held), 0 (still held) or 1 (released)",
            complexity: c"O(R) where R is the number of read holds on the lock",
            arity: -4,
            key: RELEASE_KEY,
            args: vec![
                lock(),
                owner(),
                mode_choice(c"Which kind of hold to release"),
                millis(
                    c"LEASE",
                    c"Milliseconds a write hold still held after this release lasts",
                ),
                optional(
                    c"REQUEST",
                    arg(
                        c"request",
                        Kind::Block(vec![
                            arg(c"id", Kind::Str, c"The unlock request's id"),
                            arg(
                                c"ttl",
                                Kind::Int,
                                c"Milliseconds a retry with this id gets the same reply",
                            ),
                        ]),
                        c"Makes a retried unlock idempotent",
                    ),
                ),
            ],
        },
        Doc {
            name: c"rwlock.renew",
            summary: c"Extends the owner's own holds to the lease (the watchdog's call). Replies 1 if it held anything, else 0",
            complexity: c"O(N) where N is the owner's number of read holds",
            arity: 4,
            key: ACQUIRE_KEY,
            args: vec![lock(), owner(), lease()],
        },
        Doc {
            name: c"rwlock.forceunlock",
            summary: c"Deletes the lock whoever holds it (only in the given mode, if any). Replies 1 if deleted, else 0",
            complexity: c"O(R) where R is the number of read holds on the lock",
            arity: -2,
            key: FORCE_KEY,
            args: vec![
                lock(),
                Arg {
                    optional: true,
                    ..mode_choice(c"Delete the lock only if it is in this mode")
                },
            ],
        },
        Doc {
            name: c"rwlock.info",
            summary: c"Shows the lock's mode, TTL and owners with their read and write counts and read leases",
            complexity: c"O(R) where R is the number of read holds on the lock",
            arity: 2,
            key: INFO_KEY,
            args: vec![lock()],
        },
    ]
}

/// The C form of an argument list, ended by an all-zero entry. Nested lists
/// are kept in `arena` so their pointers stay valid until Redis copies them.
fn raw_args(
    args: &[Arg],
    arena: &mut Vec<Vec<raw::RedisModuleCommandArg>>,
) -> *mut raw::RedisModuleCommandArg {
    let mut out: Vec<raw::RedisModuleCommandArg> = args
        .iter()
        .map(|a| {
            let (type_, token, subargs) = match &a.kind {
                Kind::Key => (
                    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY,
                    a.token,
                    None,
                ),
                Kind::Str => (
                    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
                    a.token,
                    None,
                ),
                Kind::Int => (
                    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
                    a.token,
                    None,
                ),
                Kind::Token(word) => (
                    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
                    Some(*word),
                    None,
                ),
                Kind::OneOf(subs) => (
                    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_ONEOF,
                    a.token,
                    Some(raw_args(subs, arena)),
                ),
                Kind::Block(subs) => (
                    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_BLOCK,
                    a.token,
                    Some(raw_args(subs, arena)),
                ),
            };
            raw::RedisModuleCommandArg {
                name: a.name.as_ptr(),
                type_,
                // Only the key refers to a key spec: the first and only one.
                key_spec_index: if matches!(a.kind, Kind::Key) { 0 } else { -1 },
                token: token.map_or(ptr::null(), CStr::as_ptr),
                summary: a.summary.as_ptr(),
                since: ptr::null(),
                flags: if a.optional {
                    raw::REDISMODULE_CMD_ARG_OPTIONAL as c_int
                } else {
                    raw::REDISMODULE_CMD_ARG_NONE as c_int
                },
                deprecated_since: ptr::null(),
                subargs: subargs.unwrap_or(ptr::null_mut()),
                display_text: ptr::null(),
            }
        })
        .collect();
    // SAFETY: the C struct is plain data for which all zeroes is the
    // terminating entry Redis looks for (a null name).
    out.push(unsafe { std::mem::zeroed() });
    let head = out.as_mut_ptr();
    // Moving the Vec into the arena keeps its heap buffer where it is.
    arena.push(out);
    head
}

/// The lock key is argument 1, and the command touches no other key it is
/// given: the timeout keys and latches it also uses derive from the name and
/// share its hash slot.
fn key_specs(flags: &KeyFlags) -> [raw::RedisModuleCommandKeySpec; 2] {
    // SAFETY: plain C data; zeroes are the terminator (begin_search_type 0,
    // INVALID) and unused union members.
    let mut specs: [raw::RedisModuleCommandKeySpec; 2] = unsafe { std::mem::zeroed() };
    specs[0].notes = c"Also the lock's read-lease keys and unlock latches, named from the lock and in its hash slot".as_ptr();
    specs[0].flags = u64::from(flags.0);
    specs[0].begin_search_type = raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_INDEX;
    specs[0].bs.index.pos = 1;
    specs[0].find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_RANGE;
    specs[0].fk.range = raw::RedisModuleCommandKeySpec__bindgen_ty_2__bindgen_ty_1 {
        lastkey: 0,
        keystep: 1,
        limit: 0,
    };
    specs
}

/// Describes every command to Redis. Called from the module's load, after
/// the commands exist. Redis copies every string and array it is given.
pub fn register(ctx: &Context) -> Result<(), String> {
    // The header's RedisModule_CurrentCommandInfoVersion is a static of its
    // own, not an exported symbol: build it as it does (version 1).
    let version = raw::RedisModuleCommandInfoVersion {
        version: 1,
        sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
        sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
        sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
    };
    // SAFETY: Redis fills the API table once, before the module's load runs;
    // it is only read here, on the main thread.
    let (get_command, set_info) =
        unsafe { (raw::RedisModule_GetCommand, raw::RedisModule_SetCommandInfo) };
    let (Some(get_command), Some(set_info)) = (get_command, set_info) else {
        return Err("this Redis cannot describe commands (Redis 7.0 or later needed)".into());
    };
    for doc in docs() {
        let name = doc.name.to_string_lossy();
        // SAFETY: a load-time context and a NUL-terminated name.
        let command = unsafe { get_command(ctx.get_raw(), doc.name.as_ptr()) };
        if command.is_null() {
            return Err(format!("command {name} is not registered"));
        }
        let mut arena = Vec::new();
        let args = raw_args(&doc.args, &mut arena);
        let mut specs = key_specs(&doc.key);
        let info = raw::RedisModuleCommandInfo {
            version: &version,
            summary: doc.summary.as_ptr(),
            complexity: doc.complexity.as_ptr(),
            since: SINCE.as_ptr(),
            history: ptr::null_mut(),
            tips: ptr::null(),
            arity: doc.arity,
            key_specs: specs.as_mut_ptr(),
            args,
        };
        // SAFETY: every pointer in `info` is valid for the call (statics,
        // `specs`, `version` and `arena` outlive it) and the arrays end with
        // their terminators; Redis copies what it keeps.
        if unsafe { set_info(command, &info) } == raw::REDISMODULE_ERR as c_int {
            return Err(format!(
                "Redis refused the docs of {name} (see the log above)"
            ));
        }
    }
    Ok(())
}
