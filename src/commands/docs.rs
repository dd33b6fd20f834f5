//! What `COMMAND DOCS` and `COMMAND INFO` tell about each command of the
//! table: summary, complexity, debut version, arity, the lock key's spec and
//! the arguments, given to Redis with `RedisModule_SetCommandInfo` (Redis
//! 7.0+). Clients such as redis-cli 7.2+ build their argument hints from
//! these docs; the README's command list is checked against `syntax`.

use std::ffi::CStr;
use std::os::raw::c_int;
use std::ptr;

use redis_module::{raw, Context};

use crate::server::{self, CommandFn};

/// One command of the table.
pub struct Command {
    pub name: &'static CStr,
    pub entry: CommandFn,
    /// `blocking`: `BLOCK` may park the client.
    pub flags: &'static CStr,
    pub summary: &'static CStr,
    pub complexity: &'static CStr,
    /// The module version in which the command first appeared.
    pub since: &'static CStr,
    /// Redis's convention: N exactly, -N at least N (the name included).
    pub arity: c_int,
    /// The lock name, argument 1, is the only key a command is given.
    pub key: KeyFlags,
    /// The keys the command derives from the lock's name.
    pub key_notes: &'static CStr,
    pub args: Vec<ArgDoc>,
}

/// The kinds of argument the commands take.
pub enum ArgKind {
    /// The lock name: the command's one declared key.
    Key,
    Str,
    Int,
    /// A keyword standing alone, such as `READ`.
    Token(&'static CStr),
    /// Exactly one of the alternatives.
    OneOf(Vec<ArgDoc>),
    /// A keyword followed by its values, such as `REQUEST id ttl`.
    Block(Vec<ArgDoc>),
}

pub struct ArgDoc {
    pub name: &'static CStr,
    pub kind: ArgKind,
    /// The keyword in front of the value (`BLOCK ms`); None for positional.
    pub token: Option<&'static CStr>,
    pub optional: bool,
    /// Given one or more times (`kind name [kind name ...]`).
    pub multiple: bool,
    pub summary: &'static CStr,
    /// The module version that added it to a command older than it.
    pub since: Option<&'static CStr>,
}

pub fn arg(name: &'static CStr, kind: ArgKind, summary: &'static CStr) -> ArgDoc {
    ArgDoc {
        name,
        kind,
        token: None,
        optional: false,
        multiple: false,
        summary,
        since: None,
    }
}

/// The keyword that heads a multi-hold's list, where its key spec begins.
pub const HOLDS: &CStr = c"HOLDS";

/// `HOLDS n LOCK|READ|WRITE name [LOCK|READ|WRITE name ...]`: the count,
/// then each hold's kind and lock name.
pub fn holds() -> [ArgDoc; 2] {
    [
        ArgDoc {
            token: Some(HOLDS),
            ..arg(c"n", ArgKind::Int, c"How many holds follow (1 to 100)")
        },
        ArgDoc {
            multiple: true,
            ..arg(
                c"hold",
                ArgKind::Block(vec![
                    arg(
                        c"kind",
                        ArgKind::OneOf(vec![
                            arg(
                                c"lock",
                                ArgKind::Token(c"LOCK"),
                                c"A plain lock (LOCK.ACQUIRE)",
                            ),
                            arg(
                                c"read",
                                ArgKind::Token(c"READ"),
                                c"A read hold (RWLOCK.READ)",
                            ),
                            arg(
                                c"write",
                                ArgKind::Token(c"WRITE"),
                                c"The write hold (RWLOCK.WRITE)",
                            ),
                        ]),
                        c"What to take of the lock",
                    ),
                    arg(
                        c"name",
                        ArgKind::Key,
                        c"The lock's name; each name once, all in one hash slot in a cluster",
                    ),
                ]),
                c"One hold",
            )
        },
    ]
}

pub fn optional(token: &'static CStr, mut arg: ArgDoc) -> ArgDoc {
    arg.token = Some(token);
    arg.optional = true;
    arg
}

/// An optional `KEYWORD milliseconds`, named as Redis's own commands name
/// such values (`SET … PX milliseconds`), which is what hints show.
pub fn millis(token: &'static CStr, summary: &'static CStr) -> ArgDoc {
    optional(token, arg(c"milliseconds", ArgKind::Int, summary))
}

pub fn lock() -> ArgDoc {
    arg(
        c"lock",
        ArgKind::Key,
        c"The lock's name: its hash key, as Redisson names it",
    )
}

pub fn owner() -> ArgDoc {
    arg(
        c"owner",
        ArgKind::Str,
        c"Who holds the lock: Redisson's '<client UUID>:<thread id>'",
    )
}

pub fn lease() -> ArgDoc {
    arg(
        c"lease",
        ArgKind::Int,
        c"Milliseconds the hold lasts unless renewed",
    )
}

pub fn block() -> ArgDoc {
    millis(
        c"BLOCK",
        c"Wait on the server up to this many milliseconds (0: no limit)",
    )
}

pub fn mode_choice(summary: &'static CStr) -> ArgDoc {
    arg(
        c"mode",
        ArgKind::OneOf(vec![
            arg(c"read", ArgKind::Token(c"READ"), c"A read hold"),
            arg(c"write", ArgKind::Token(c"WRITE"), c"The write hold"),
        ]),
        summary,
    )
}

/// What a read-write lock command touches besides its hash.
pub const RWLOCK_KEYS: &CStr =
    c"Also the lock's read-lease keys, unlock latches and acquisition latches redisson_lock_request_latch:{lock}:id (REQUEST), named from the lock and in its hash slot";
/// What a plain lock command touches besides its hash.
pub const LOCK_KEYS: &CStr = c"Also the lock's fencing token redisson_lock_token:{lock}, unlock latches and acquisition latches redisson_lock_request_latch:{lock}:id (REQUEST), named from the lock and in its hash slot";

/// What a fair lock command touches besides its hash.
pub const FAIR_KEYS: &CStr = c"Also the lock's line redisson_lock_queue:{lock} (a list), its waiters' deadlines redisson_lock_timeout:{lock} (a sorted set), unlock latches and acquisition latches redisson_lock_request_latch:{lock}:id (REQUEST), named from the lock and in its hash slot";

/// What a latch command touches: its count alone.
pub const LATCH_KEYS: &CStr =
    c"The latch's count, a string named as the latch (Redisson's RCountDownLatch); no other key";

/// `LATCH.TRYSETCOUNT` writes the count only where no key is (as SETNX).
pub const INSERT_KEY: KeyFlags =
    KeyFlags(raw::REDISMODULE_CMD_KEY_OW | raw::REDISMODULE_CMD_KEY_INSERT);

/// A count-down latch's name, its count's key.
pub fn latch() -> ArgDoc {
    arg(
        c"name",
        ArgKind::Key,
        c"The latch's name: its count's key, as Redisson names it (no braces)",
    )
}

/// What a multi-hold command touches besides the listed hashes.
pub const MULTI_KEYS: &CStr = c"Also each lock's read-lease keys, named from the lock and in its hash slot; in a cluster every listed name must be in one slot (hash tags)";

/// An optional flag standing alone, such as `FENCED`.
pub fn flag(name: &'static CStr, token: &'static CStr, summary: &'static CStr) -> ArgDoc {
    ArgDoc {
        optional: true,
        ..arg(name, ArgKind::Token(token), summary)
    }
}

/// `FENCED`.
pub fn fenced() -> ArgDoc {
    flag(
        c"fenced",
        c"FENCED",
        c"Take the lock's next fencing token; reply [-1, token] or [pttl, -1]",
    )
}

/// `SESSION`, added in `since`.
pub fn session(since: &'static CStr) -> ArgDoc {
    ArgDoc {
        since: Some(since),
        ..flag(
            c"session",
            c"SESSION",
            c"Bind the hold to this connection: renewed while it is open, released when it closes",
        )
    }
}

/// Key spec flags (`REDISMODULE_CMD_KEY_*`) of the lock key, chosen as for
/// Redis's own hash commands: acquiring and renewing read the holds and update
/// counts and TTLs (as HINCRBY: RW ACCESS UPDATE); an unlock may delete the
/// lock (RW ACCESS DELETE); a forced unlock deletes it returning nothing of
/// it (RW DELETE); RWLOCK.INFO only reads (RO ACCESS).
pub struct KeyFlags(u32);

pub const ACQUIRE_KEY: KeyFlags = KeyFlags(
    raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_ACCESS | raw::REDISMODULE_CMD_KEY_UPDATE,
);
pub const RELEASE_KEY: KeyFlags = KeyFlags(
    raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_ACCESS | raw::REDISMODULE_CMD_KEY_DELETE,
);
pub const FORCE_KEY: KeyFlags =
    KeyFlags(raw::REDISMODULE_CMD_KEY_RW | raw::REDISMODULE_CMD_KEY_DELETE);
pub const INFO_KEY: KeyFlags =
    KeyFlags(raw::REDISMODULE_CMD_KEY_RO | raw::REDISMODULE_CMD_KEY_ACCESS);

/// Whether the argument is, or contains, a key.
pub fn has_key(a: &ArgDoc) -> bool {
    match &a.kind {
        ArgKind::Key => true,
        ArgKind::OneOf(subs) | ArgKind::Block(subs) => subs.iter().any(has_key),
        _ => false,
    }
}

/// The C form of an argument list, ended by an all-zero entry. Nested lists
/// are kept in `arena` so their pointers stay valid until Redis copies them.
fn raw_args(
    args: &[ArgDoc],
    arena: &mut Vec<Vec<raw::RedisModuleCommandArg>>,
) -> *mut raw::RedisModuleCommandArg {
    let mut out: Vec<raw::RedisModuleCommandArg> = args
        .iter()
        .map(|a| {
            let (type_, token, subargs) = match &a.kind {
                ArgKind::Key => (
                    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_KEY,
                    a.token,
                    None,
                ),
                ArgKind::Str => (
                    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_STRING,
                    a.token,
                    None,
                ),
                ArgKind::Int => (
                    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_INTEGER,
                    a.token,
                    None,
                ),
                ArgKind::Token(word) => (
                    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_PURE_TOKEN,
                    Some(*word),
                    None,
                ),
                ArgKind::OneOf(subs) => (
                    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_ONEOF,
                    a.token,
                    Some(raw_args(subs, arena)),
                ),
                ArgKind::Block(subs) => (
                    raw::RedisModuleCommandArgType_REDISMODULE_ARG_TYPE_BLOCK,
                    a.token,
                    Some(raw_args(subs, arena)),
                ),
            };
            raw::RedisModuleCommandArg {
                name: a.name.as_ptr(),
                type_,
                // Only the key refers to a key spec: the first and only one.
                key_spec_index: if matches!(a.kind, ArgKind::Key) {
                    0
                } else {
                    -1
                },
                token: token.map_or(ptr::null(), CStr::as_ptr),
                summary: a.summary.as_ptr(),
                since: a.since.map_or(ptr::null(), CStr::as_ptr),
                flags: (if a.optional {
                    raw::REDISMODULE_CMD_ARG_OPTIONAL
                } else {
                    raw::REDISMODULE_CMD_ARG_NONE
                } | if a.multiple {
                    raw::REDISMODULE_CMD_ARG_MULTIPLE
                } else {
                    raw::REDISMODULE_CMD_ARG_NONE
                }) as c_int,
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
/// share its hash slot. A multi-hold's names follow `HOLDS n`, one every
/// second argument after each kind.
fn key_specs(command: &Command) -> [raw::RedisModuleCommandKeySpec; 2] {
    // SAFETY: plain C data; zeroes are the terminator (begin_search_type 0,
    // INVALID) and unused union members.
    let mut specs: [raw::RedisModuleCommandKeySpec; 2] = unsafe { std::mem::zeroed() };
    // A keyless command has no spec: the terminator alone.
    if !command.args.iter().any(has_key) {
        return specs;
    }
    specs[0].notes = command.key_notes.as_ptr();
    specs[0].flags = u64::from(command.key.0);
    if let Some(at) = command.args.iter().position(|a| a.token == Some(HOLDS)) {
        // The search starts after the owner and lease: an owner spelled
        // HOLDS is no keyword, and options before HOLDS are words and
        // numbers.
        let fixed = command.args[..at].iter().filter(|a| !a.optional).count();
        specs[0].begin_search_type =
            raw::RedisModuleKeySpecBeginSearchType_REDISMODULE_KSPEC_BS_KEYWORD;
        specs[0].bs.keyword = raw::RedisModuleCommandKeySpec__bindgen_ty_1__bindgen_ty_2 {
            keyword: HOLDS.as_ptr(),
            startfrom: fixed as c_int + 1,
        };
        // Redis 7.0 ends a keynum spec at first + n - 1 whatever the step
        // (a bug later releases fix): it would find half the names. Variable
        // flags make every version ask the command's own keys report
        // (`getkeys-api`) instead; the spec still tells clients the layout.
        specs[0].flags |= u64::from(raw::REDISMODULE_CMD_KEY_VARIABLE_FLAGS);
        specs[0].find_keys_type = raw::RedisModuleKeySpecFindKeysType_REDISMODULE_KSPEC_FK_KEYNUM;
        specs[0].fk.keynum = raw::RedisModuleCommandKeySpec__bindgen_ty_2__bindgen_ty_2 {
            keynumidx: 0,
            firstkey: 2,
            keystep: 2,
        };
        return specs;
    }
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

/// Describes a created command to Redis. Called from the module's load;
/// Redis copies every string and array it is given.
pub fn describe(ctx: &Context, command: &Command) -> Result<(), String> {
    // The header's RedisModule_CurrentCommandInfoVersion is a static of its
    // own, not an exported symbol: build it as it does (version 1).
    let version = raw::RedisModuleCommandInfoVersion {
        version: 1,
        sizeof_historyentry: std::mem::size_of::<raw::RedisModuleCommandHistoryEntry>(),
        sizeof_keyspec: std::mem::size_of::<raw::RedisModuleCommandKeySpec>(),
        sizeof_arg: std::mem::size_of::<raw::RedisModuleCommandArg>(),
    };
    let mut arena = Vec::new();
    let args = raw_args(&command.args, &mut arena);
    let mut specs = key_specs(command);
    let info = raw::RedisModuleCommandInfo {
        version: &version,
        summary: command.summary.as_ptr(),
        complexity: command.complexity.as_ptr(),
        since: command.since.as_ptr(),
        history: ptr::null_mut(),
        tips: ptr::null(),
        arity: command.arity,
        key_specs: specs.as_mut_ptr(),
        args,
    };
    // Every pointer in `info` outlives the call: statics, `specs`,
    // `version` and `arena`.
    server::set_command_info(ctx, command.name, &info)
}

#[cfg(test)]
/// The command's syntax as users read it, from its arguments:
/// `RWLOCK.UNLOCK lock owner READ|WRITE [LEASE ms] [REQUEST id ttl]`.
pub fn syntax(command: &Command) -> String {
    let mut out = command.name.to_string_lossy().to_uppercase();
    for a in &command.args {
        out.push(' ');
        out.push_str(&shown(a));
    }
    out
}

#[cfg(test)]
/// One argument as the syntax line shows it; milliseconds are `ms`.
fn shown(a: &ArgDoc) -> String {
    let name = |n: &CStr| match n.to_string_lossy().as_ref() {
        "milliseconds" => "ms".to_string(),
        other => other.to_string(),
    };
    let text = match &a.kind {
        ArgKind::Key | ArgKind::Str | ArgKind::Int => name(a.name),
        ArgKind::Token(word) => word.to_string_lossy().into_owned(),
        ArgKind::OneOf(subs) => subs.iter().map(shown).collect::<Vec<_>>().join("|"),
        ArgKind::Block(subs) => subs.iter().map(shown).collect::<Vec<_>>().join(" "),
    };
    let text = if a.multiple {
        format!("{text} [{text} ...]")
    } else {
        text
    };
    let text = match a.token {
        Some(token) => format!("{} {text}", token.to_string_lossy()),
        None => text,
    };
    if a.optional {
        format!("[{text}]")
    } else {
        text
    }
}

/// `lock owner lease [BLOCK ms] [SESSION]`, the `flags` the command
/// takes, `[REQUEST id ttl]` and `[HELD n]`: may park the client.
pub fn acquisition(
    name: &'static CStr,
    since: &'static CStr,
    entry: CommandFn,
    summary: &'static CStr,
    key_notes: &'static CStr,
    flags: Vec<ArgDoc>,
) -> Command {
    let mut args = vec![lock(), owner(), lease(), block(), session(V3)];
    args.extend(flags);
    args.push(acquire_request_option());
    args.push(held_acquire_option());
    Command {
        name,
        entry,
        flags: c"write deny-oom blocking",
        summary,
        complexity: c"O(1), O(W) when the lock is released to W waiters",
        since,
        arity: -4,
        key: ACQUIRE_KEY,
        key_notes,
        args,
    }
}

/// `[LEASE ms]` of an unlock.
pub fn lease_option() -> ArgDoc {
    millis(
        c"LEASE",
        c"Milliseconds a hold still held after this release lasts",
    )
}

/// `[REQUEST id ttl]`: the request's id and how long a retry with it is
/// answered, each described as the command takes it.
fn request(id: &'static CStr, ttl: &'static CStr, summary: &'static CStr) -> ArgDoc {
    optional(
        c"REQUEST",
        arg(
            c"request",
            ArgKind::Block(vec![
                arg(c"id", ArgKind::Str, id),
                arg(c"ttl", ArgKind::Int, ttl),
            ]),
            summary,
        ),
    )
}

/// `[REQUEST id ttl]` of an unlock.
pub fn request_option() -> ArgDoc {
    request(
        c"The unlock request's id",
        c"Milliseconds a retry with this id gets the same reply",
        c"Makes a retried unlock idempotent",
    )
}

/// `[REQUEST id ttl]` of an acquisition (docs/design.md §14.7).
pub fn acquire_request_option() -> ArgDoc {
    ArgDoc {
        since: Some(V4),
        ..request(
            c"The acquisition request's id",
            c"Milliseconds from the grant a retry with this id gets the same reply and changes nothing",
            c"Makes a retried acquisition idempotent: the grant is remembered in redisson_lock_request_latch:{lock}:id",
        )
    }
}

/// `[HELD n]` of a lock's acquisition (docs/design.md §14.8).
pub fn held_acquire_option() -> ArgDoc {
    optional(
        c"HELD",
        arg(
            c"n",
            ArgKind::Int,
            c"The owner's holds of this kind before the call: when it holds one more, the call was granted before and replies so, changing nothing",
        ),
    )
}

/// `[HELD n]` of a lock's release (docs/design.md §14.8).
pub fn held_release_option() -> ArgDoc {
    optional(
        c"HELD",
        arg(
            c"n",
            ArgKind::Int,
            c"The owner's holds of this kind before the call: when 2 or more and it holds one fewer, the release was done before and replies 0, changing nothing",
        ),
    )
}

/// `lock owner [LEASE ms] [REQUEST id ttl] [HELD n]`: the release of a
/// plain or fair lock, which share their hash.
pub fn hash_release_args() -> Vec<ArgDoc> {
    vec![
        lock(),
        owner(),
        lease_option(),
        request_option(),
        held_release_option(),
    ]
}

/// The module versions the commands appeared in: the read-write lock, the
/// plain lock, then the multi-hold and session holds, then the fair lock.
pub const V1: &CStr = c"0.1.0";
pub const V2: &CStr = c"0.2.0";
pub const V3: &CStr = c"0.3.0";
pub const V4: &CStr = c"0.4.0";

/// `[WAIT ms]` of the fair lock: Redisson's thread wait time.
pub fn wait_option() -> ArgDoc {
    millis(
        c"WAIT",
        c"Redisson's thread wait time: how far this waiter's deadline lies behind the one before it (default rwlock.fair-wait)",
    )
}

/// `[NOREENTRY]`.
pub fn no_reentry() -> ArgDoc {
    flag(
        c"noreentry",
        c"NOREENTRY",
        c"A non-reentrant lock: its holder taking it again is an error",
    )
}

/// `owner [lease] [options] HOLDS n kind name [kind name ...]`.
pub fn multi_args(head: Vec<ArgDoc>) -> Vec<ArgDoc> {
    let mut args = head;
    args.extend(holds());
    args
}
