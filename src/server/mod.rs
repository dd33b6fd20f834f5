//! The seam between the module and the server: every call into Redis's C
//! API that the shell makes goes through a safe function here, so each
//! unsafe block and its contract is written once. Callers hold the plain
//! handles Redis uses (a key, a string, a blocked client); what makes them
//! valid is said where they are made. Everything runs on Redis's main
//! thread.
//!
//! Left outside, each where it is, because a wrapper would add nothing: the
//! allocator's check that Redis handed over its API (`alloc`), and the
//! `redis-module` crate's own safe helpers (timers, `INFO` fields, calls);
//! only an agenda's timer, armed alike by two registries, is here
//! (`timers`).

pub mod keys;
pub mod scan;
pub mod strings;
pub mod timers;

use std::ffi::{c_void, CStr};
use std::os::raw::{c_char, c_int};
use std::ptr;
use std::time::Duration;

use redis_module::{raw, Context, ContextFlags};

pub use self::keys::{open_key, Key, KeyType, HASH_DELETE};
pub use self::strings::RawString;

/// The C entry point of a command.
pub type CommandFn = raw::RedisModuleCmdFunc;

/// A command argument as Redis passed it: borrowed for the length of the
/// command, never retained or freed, so a command costs no allocation and
/// no reference counting before it starts.
#[repr(transparent)]
pub struct ArgString(RawString);

impl ArgString {
    /// Views a command's `argc` arguments.
    ///
    /// # Safety
    /// `argv` must be null or point to `argc` strings that outlive the view,
    /// as a command handler's arguments do.
    pub unsafe fn slice<'a>(argv: *mut RawString, argc: i32) -> &'a [ArgString] {
        match usize::try_from(argc) {
            Ok(len) if !argv.is_null() => {
                // SAFETY: `ArgString` is one string pointer (repr(transparent)),
                // and the caller vouches for `argc` of them.
                unsafe { std::slice::from_raw_parts(argv.cast::<ArgString>(), len) }
            }
            _ => &[],
        }
    }

    pub fn ptr(&self) -> RawString {
        self.0
    }

    /// Its bytes: each call is a call into Redis, so callers fetch them once.
    #[inline]
    pub fn bytes(&self) -> &[u8] {
        strings::bytes(self.0)
    }
}

/// The server's clock in Unix milliseconds, the one lock deadlines are set
/// by.
#[inline]
pub fn milliseconds() -> i64 {
    // SAFETY: a plain read of the server's clock.
    unsafe { raw::RedisModule_Milliseconds.expect("Milliseconds")() }
}

#[inline]
pub fn selected_db(ctx: &Context) -> i32 {
    // SAFETY: a live context.
    unsafe { raw::RedisModule_GetSelectedDb.expect("GetSelectedDb")(ctx.get_raw()) }
}

/// The id of the context's client (`CLIENT ID`).
pub fn client_id(ctx: &Context) -> u64 {
    // SAFETY: a live context.
    unsafe { raw::RedisModule_GetClientId.expect("GetClientId")(ctx.get_raw()) }
}

/// The id of the client calling, when it has a connection of its own;
/// None for scripts and functions, and for other modules' calls. Those are
/// told apart by the context's flags before any lookup by id: Valkey 9 runs
/// a script's commands on a client it finds by id but without a
/// connection, and reading such a client's info crashes the server.
pub fn calling_connection(ctx: &Context) -> Option<u64> {
    let flags = context_flags(ctx);
    let flag = |f: u32| flags & f as c_int != 0;
    // A module's call that may not block is no client's connection; a
    // transaction's commands may not block either, but come from one.
    let unconnected = flag(raw::REDISMODULE_CTX_FLAGS_LUA)
        || (flag(raw::REDISMODULE_CTX_FLAGS_DENY_BLOCKING)
            && !flag(raw::REDISMODULE_CTX_FLAGS_MULTI));
    if unconnected {
        return None;
    }
    let id = client_id(ctx);
    is_connection(id).then_some(id)
}

/// Whether `id` is a client with a connection: module calls' clients are
/// none.
fn is_connection(id: u64) -> bool {
    // SAFETY: plain C data, all zeroes but the version GetClientInfoById
    // reads first; it fills the rest or fails.
    unsafe {
        let mut info: raw::RedisModuleClientInfo = std::mem::zeroed();
        info.version = 1;
        raw::RedisModule_GetClientInfoById.expect("GetClientInfoById")(
            &mut info as *mut raw::RedisModuleClientInfo as *mut c_void,
            id,
        ) == raw::REDISMODULE_OK as c_int
    }
}

/// Ends the event loop's next wait at once. A timer created between two
/// turns (Redis frees a client that sent QUIT just before it waits) would
/// otherwise wait for the next event or `serverCron`, up to 1000/hz ms.
pub fn wake_event_loop() {
    unsafe extern "C" fn nothing(_data: *mut c_void) {}
    // SAFETY: the main thread; a callback that touches nothing and no data.
    // Redis writes to its module pipe, which the loop's wait watches.
    unsafe {
        if let Some(add) = raw::RedisModule_EventLoopAddOneShot {
            add(Some(nothing), ptr::null_mut());
        }
    }
}

/// Selects `db` for the context's client: only for the temporary client of a
/// timer's or an event's context, never a user's.
pub fn select_db(ctx: &Context, db: i32) {
    // SAFETY: a live context; selecting a database that exists.
    unsafe { raw::RedisModule_SelectDb.expect("SelectDb")(ctx.get_raw(), db) };
}

/// The context's `REDISMODULE_CTX_FLAGS_*`.
#[inline]
pub fn context_flags(ctx: &Context) -> c_int {
    // SAFETY: a live context.
    unsafe { raw::RedisModule_GetContextFlags.expect("GetContextFlags")(ctx.get_raw()) }
}

/// Whether a timer or event callback that writes may write now.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum WriteTurn {
    /// A master, writes flowing.
    Now,
    /// A replica: timers and events also run there, and it must never
    /// write (it gets its master's effects).
    Never,
    /// A master while clients are paused (CLIENT PAUSE, a manual
    /// failover): no write goes through, and expiry is held back, so a key
    /// past its deadline reads as missing but is still there and writing
    /// it anew trips an assertion that takes Redis 7.0 down. Try again
    /// after `PAUSED_RETRY`.
    Later,
}

/// How soon a write put off by paused clients is tried again.
const PAUSED_RETRY: Duration = Duration::from_millis(10);

fn write_turn(ctx: &Context) -> WriteTurn {
    if !ctx.get_flags().contains(ContextFlags::MASTER) {
        WriteTurn::Never
    } else if writes_paused() {
        WriteTurn::Later
    } else {
        WriteTurn::Now
    }
}

/// The one guard of every timer callback that writes (see [`WriteTurn`]):
/// true when it may write now. Never on a replica; while clients are
/// paused, `retry` is handed the delay after which the callback tries
/// again (a callback whose work comes round anyway ignores it).
#[inline]
pub fn may_write(ctx: &Context, retry: impl FnOnce(Duration)) -> bool {
    match write_turn(ctx) {
        WriteTurn::Now => true,
        WriteTurn::Never => false,
        WriteTurn::Later => {
            retry(PAUSED_RETRY);
            false
        }
    }
}

/// True while clients are paused (CLIENT PAUSE, a manual failover).
pub fn writes_paused() -> bool {
    // SAFETY: a plain query of the server's state.
    unsafe { raw::RedisModule_AvoidReplicaTraffic.expect("AvoidReplicaTraffic")() != 0 }
}

/// The classes in `notify-keyspace-events`, as `REDISMODULE_NOTIFY_*` bits.
pub fn notify_classes() -> c_int {
    // SAFETY: a plain read of the server's configuration.
    unsafe { raw::RedisModule_GetNotifyKeyspaceEvents.expect("GetNotifyKeyspaceEvents")() }
}

// ---------------------------------------------------------------------------
// Effects: signals, keyspace events, replication, publishing
// ---------------------------------------------------------------------------

/// Tells Redis a key changed (WATCH, client-side caching).
#[inline]
pub fn signal_modified(ctx: &Context, name: RawString) {
    // SAFETY: a live context and a valid key name.
    unsafe { raw::RedisModule_SignalModifiedKey.expect("SignalModifiedKey")(ctx.get_raw(), name) };
}

/// Raises keyspace event `event` of `class` on `key`; Redis delivers it to
/// subscribers before this returns.
#[inline]
pub fn notify_keyspace_event(ctx: &Context, class: c_int, event: &CStr, key: RawString) {
    // SAFETY: a live context, a valid key name and a NUL-terminated name.
    unsafe {
        raw::RedisModule_NotifyKeyspaceEvent.expect("NotifyKeyspaceEvent")(
            ctx.get_raw(),
            class,
            event.as_ptr(),
            key,
        );
    }
}

/// Counts the command as a write for save points, propagating nothing when
/// nothing receives it.
#[inline]
pub fn replicate_verbatim(ctx: &Context) {
    // SAFETY: a live command context.
    unsafe { raw::RedisModule_ReplicateVerbatim.expect("ReplicateVerbatim")(ctx.get_raw()) };
}

/// Propagates `command args…` (one to four arguments) to replicas and the
/// AOF, inside the command's MULTI/EXEC.
pub fn replicate(ctx: &Context, command: &CStr, args: &[&[u8]]) {
    let ctx = ctx.get_raw();
    // SAFETY: a live context; `b` takes a pointer and a size_t length per
    // argument, and each call passes exactly as many pairs as its format.
    unsafe {
        let replicate = raw::RedisModule_Replicate.expect("Replicate");
        let c = command.as_ptr();
        // One pointer and length per argument, as the format's `b`s say.
        macro_rules! with {
            ($format:literal; $($a:ident),+) => {
                replicate(ctx, c, $format.as_ptr(), $($a.as_ptr() as *const c_char, $a.len()),+)
            };
        }
        match *args {
            [a] => with!(c"b"; a),
            [a, b] => with!(c"bb"; a, b),
            [a, b, d] => with!(c"bbb"; a, b, d),
            [a, b, d, e] => with!(c"bbbb"; a, b, d, e),
            _ => unreachable!("effects have one to four arguments"),
        };
    }
}

/// Publishes `message` on `channel` (sharded with `shard`) from this node.
pub fn publish_message(ctx: &Context, shard: bool, channel: RawString, message: RawString) {
    // SAFETY: a live context and two valid strings; publishing copies them.
    unsafe {
        if shard {
            raw::RedisModule_PublishMessageShard.expect("PublishMessageShard")(
                ctx.get_raw(),
                channel,
                message,
            );
        } else {
            raw::RedisModule_PublishMessage.expect("PublishMessage")(
                ctx.get_raw(),
                channel,
                message,
            );
        }
    }
}

// ---------------------------------------------------------------------------
// Blocked clients
// ---------------------------------------------------------------------------

/// A parked client's handle, valid until the module unblocks it.
pub type Blocked = *mut raw::RedisModuleBlockedClient;

/// Redis's callback that replies to an unblocked client.
pub type ReplyFn = unsafe extern "C" fn(*mut raw::RedisModuleCtx, *mut RawString, c_int) -> c_int;
/// Redis's callback that frees what [`unblock`] handed over.
pub type FreeFn = unsafe extern "C" fn(*mut raw::RedisModuleCtx, *mut c_void);
/// Redis's callback for a parked client that disconnected.
pub type DisconnectFn = unsafe extern "C" fn(*mut raw::RedisModuleCtx, Blocked);

/// Parks the command's client with no Redis timeout; the caller must have
/// checked that the context may block. `unblocked` is Redis's timeout
/// callback, which with no timeout only `CLIENT UNBLOCK` calls: without one
/// Redis refuses to unblock a module's client.
pub fn block_client(
    ctx: &Context,
    reply: ReplyFn,
    unblocked: ReplyFn,
    free: FreeFn,
    disconnected: DisconnectFn,
) -> Blocked {
    // SAFETY: a command context that may block; callbacks of the signatures
    // BlockClient and SetDisconnectCallback expect.
    unsafe {
        let bc = raw::RedisModule_BlockClient.expect("BlockClient")(
            ctx.get_raw(),
            Some(reply),
            Some(unblocked),
            Some(free),
            0,
        );
        raw::RedisModule_SetDisconnectCallback.expect("SetDisconnectCallback")(
            bc,
            Some(disconnected),
        );
        bc
    }
}

/// Ends a parked client's wait, once; Redis later hands `data` (null: no
/// reply) to the reply callback, then to the free callback.
pub fn unblock(bc: Blocked, data: *mut c_void) {
    // SAFETY: a handle from block_client, unblocked once (the caller's
    // registry guarantees it).
    unsafe { raw::RedisModule_UnblockClient.expect("UnblockClient")(bc, data) };
}

/// In a reply or timeout callback: the parked client's handle.
pub fn blocked_handle(ctx: *mut raw::RedisModuleCtx) -> Blocked {
    // SAFETY: Redis calls those callbacks with the blocked client's context.
    unsafe { raw::RedisModule_GetBlockedClientHandle.expect("GetBlockedClientHandle")(ctx) }
}

/// In a reply callback: the data given to [`unblock`].
pub fn blocked_data(ctx: *mut raw::RedisModuleCtx) -> *mut c_void {
    // SAFETY: Redis calls reply callbacks with the unblocked client's context.
    unsafe {
        raw::RedisModule_GetBlockedClientPrivateData.expect("GetBlockedClientPrivateData")(ctx)
    }
}

// ---------------------------------------------------------------------------
// Subscriptions
// ---------------------------------------------------------------------------

/// Redis's callback for a server event.
pub type ServerEventFn =
    unsafe extern "C" fn(*mut raw::RedisModuleCtx, raw::RedisModuleEvent, u64, *mut c_void);
/// Redis's callback for a keyspace event.
pub type KeyspaceEventFn =
    unsafe extern "C" fn(*mut raw::RedisModuleCtx, c_int, *const c_char, RawString) -> c_int;

/// Subscribes to the server event `id`; false when Redis refused.
pub fn subscribe_server_event(ctx: &Context, id: u64, callback: ServerEventFn) -> bool {
    // The header's event constants are statics of its own, not exported
    // symbols: build them as it does (data version 1).
    let event = raw::RedisModuleEvent { id, dataver: 1 };
    raw::subscribe_to_server_event(ctx.get_raw(), event, Some(callback)) == raw::Status::Ok
}

/// Subscribes to keyspace events of `classes`; false when Redis refused.
/// There is no unsubscribing on Redis 7.0.
pub fn subscribe_keyspace_events(ctx: &Context, classes: c_int, callback: KeyspaceEventFn) -> bool {
    // SAFETY: a module context and a callback of the signature Redis expects.
    unsafe {
        raw::RedisModule_SubscribeToKeyspaceEvents.expect("SubscribeToKeyspaceEvents")(
            ctx.get_raw(),
            classes,
            Some(callback),
        ) == raw::REDISMODULE_OK as c_int
    }
}

// ---------------------------------------------------------------------------
// INFO of the server
// ---------------------------------------------------------------------------

/// One section of the server's INFO, freed on drop.
pub struct ServerInfo<'c> {
    ctx: &'c Context,
    data: *mut raw::RedisModuleServerInfoData,
}

impl<'c> ServerInfo<'c> {
    /// The section, or None when Redis gives nothing.
    pub fn read(ctx: &'c Context, section: &CStr) -> Option<Self> {
        // SAFETY: a live context and a NUL-terminated section name.
        let data = unsafe {
            raw::RedisModule_GetServerInfo.expect("GetServerInfo")(ctx.get_raw(), section.as_ptr())
        };
        (!data.is_null()).then_some(ServerInfo { ctx, data })
    }

    pub fn signed(&self, field: &CStr) -> Option<i64> {
        let mut err: c_int = 0;
        // SAFETY: live info data and a NUL-terminated field name.
        let value = unsafe {
            raw::RedisModule_ServerInfoGetFieldSigned.expect("ServerInfoGetFieldSigned")(
                self.data,
                field.as_ptr(),
                &mut err,
            )
        };
        (err == 0).then_some(value)
    }

    /// Whether the text field `field` is `value`.
    pub fn text_is(&self, field: &CStr, value: &CStr) -> bool {
        // SAFETY: live info data and a NUL-terminated field name; the result
        // is null or a NUL-terminated string owned by the data.
        unsafe {
            let text = raw::RedisModule_ServerInfoGetFieldC.expect("ServerInfoGetFieldC")(
                self.data,
                field.as_ptr(),
            );
            !text.is_null() && CStr::from_ptr(text) == value
        }
    }
}

impl Drop for ServerInfo<'_> {
    fn drop(&mut self) {
        // SAFETY: data read by this guard and freed once, here.
        unsafe {
            raw::RedisModule_FreeServerInfo.expect("FreeServerInfo")(self.ctx.get_raw(), self.data)
        };
    }
}

// ---------------------------------------------------------------------------
// Commands
// ---------------------------------------------------------------------------

/// A command's handler, as the table names it.
pub type Handler = fn(&Context, &[ArgString]) -> redis_module::RedisResult;

/// Every command (the table's `entry!`): the handler's reply.
pub fn run_handler(ctx: *mut raw::RedisModuleCtx, args: &[ArgString], handler: Handler) -> c_int {
    let context = Context::new(ctx);
    context.reply(handler(&context, args)) as c_int
}

/// Creates a command whose one key is argument 1 (`first_key` 1), or whose
/// keys its own entry reports (`first_key` 0, with `getkeys-api`); false
/// when Redis refused.
pub fn create_command(
    ctx: &Context,
    name: &CStr,
    entry: CommandFn,
    flags: &CStr,
    first_key: c_int,
) -> bool {
    // SAFETY: a loading module's context and NUL-terminated names.
    unsafe {
        raw::RedisModule_CreateCommand.expect("CreateCommand")(
            ctx.get_raw(),
            name.as_ptr(),
            entry,
            flags.as_ptr(),
            first_key,
            first_key,
            first_key,
        ) == raw::REDISMODULE_OK as c_int
    }
}

/// True when Redis calls a `getkeys-api` command only to learn where its
/// keys are (COMMAND GETKEYS, cluster routing, ACL key checks).
pub fn keys_position_request(ctx: &Context) -> bool {
    // SAFETY: a live command context.
    unsafe {
        raw::RedisModule_IsKeysPositionRequest.expect("IsKeysPositionRequest")(ctx.get_raw()) != 0
    }
}

/// Reports argument `pos` as a key, in a keys-position request.
pub fn key_at(ctx: &Context, pos: usize) {
    // SAFETY: a keys-position request's context, and an argument index
    // below its argc.
    unsafe { raw::RedisModule_KeyAtPos.expect("KeyAtPos")(ctx.get_raw(), pos as c_int) };
}

/// Hands a created command's docs to Redis (`COMMAND DOCS`, `COMMAND INFO`).
pub fn set_command_info(
    ctx: &Context,
    name: &CStr,
    info: &raw::RedisModuleCommandInfo,
) -> Result<(), String> {
    let label = name.to_string_lossy();
    // SAFETY: Redis fills the API table once, before the module's load runs;
    // it is only read here.
    let (get_command, set_info) =
        unsafe { (raw::RedisModule_GetCommand, raw::RedisModule_SetCommandInfo) };
    let (Some(get_command), Some(set_info)) = (get_command, set_info) else {
        return Err("this Redis cannot describe commands (Redis 7.0 or later needed)".into());
    };
    // SAFETY: a load-time context and a NUL-terminated name.
    let command = unsafe { get_command(ctx.get_raw(), name.as_ptr()) };
    if command.is_null() {
        return Err(format!("command {label} is not registered"));
    }
    // SAFETY: the caller's info is valid for the call, arrays ended by their
    // terminators; Redis copies what it keeps.
    if unsafe { set_info(command, info) } == raw::REDISMODULE_ERR as c_int {
        return Err(format!(
            "Redis refused the docs of {label} (see the log above)"
        ));
    }
    Ok(())
}
