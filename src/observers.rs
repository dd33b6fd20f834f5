//! Who could observe a command's effects: the replication stream and the
//! AOF (propagation), keyspace-event subscribers (notifications). The
//! low-level key API does neither by itself, so every write propagates and
//! announces its effect. When nobody could ever see them, that work is
//! skipped, exactly where Redis's own commands skip it:
//!
//! - Redis propagates only when the AOF is on, or when this node is a master
//!   with replicas or a replication backlog (`shouldPropagate` in server.c).
//!   The AOF state is a context flag, read per command. Replicas and the
//!   backlog are not exposed to modules, so they are read from
//!   `INFO replication` once, and again after every event that can change
//!   them (a fork, which every full sync starts with; a replica or master
//!   link change; the end of a load). A backlog created by a replica's SYNC
//!   before the fork of its snapshot holds nothing anyone can read: that
//!   replica starts from the fork, with the snapshot.
//! - Redis publishes keyspace events only for the classes configured in
//!   `notify-keyspace-events`, and hands them to modules' subscribers. The
//!   only subscriber the module can know of is its own, which needs none of
//!   the module's own events: every command that changes a lock serves its
//!   waiters and re-arms its deadline itself (`blocking::serve_after`), and
//!   lease indexes follow the module's writes directly. So events are raised
//!   when their class is configured or when another module is loaded (it may
//!   subscribe).

use std::cell::Cell;
use std::ffi::{c_void, CStr};
use std::os::raw::c_int;

use redis_module::{raw, Context, RedisValue};

use crate::leases;

/// What is known about replicas and the replication backlog.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Replication {
    /// To be read from `INFO replication` before the next write.
    Unknown,
    /// A master with neither replicas nor a backlog: nothing to feed.
    Idle,
    /// Replicas, a backlog, or a replica's role: effects are propagated.
    Live,
}

thread_local! {
    // Module code only ever runs on Redis's main thread.
    static REPLICATION: Cell<Replication> = const { Cell::new(Replication::Unknown) };
    static OTHER_MODULES: Cell<bool> = const { Cell::new(true) };
}

const MODULE_NAME: &CStr = c"rwlock";

fn read_replication(ctx: *mut raw::RedisModuleCtx) -> Replication {
    // SAFETY: a live context; the info data is read and freed here, and the
    // field names are NUL-terminated literals.
    unsafe {
        let info =
            raw::RedisModule_GetServerInfo.expect("GetServerInfo")(ctx, c"replication".as_ptr());
        if info.is_null() {
            return Replication::Live;
        }
        let field = |name: &CStr| {
            let mut err: c_int = 0;
            let value = raw::RedisModule_ServerInfoGetFieldSigned
                .expect("ServerInfoGetFieldSigned")(
                info, name.as_ptr(), &mut err
            );
            (err == 0).then_some(value)
        };
        let role = raw::RedisModule_ServerInfoGetFieldC.expect("ServerInfoGetFieldC")(
            info,
            c"role".as_ptr(),
        );
        let master = !role.is_null() && CStr::from_ptr(role) == c"master";
        let idle = master
            && field(c"connected_slaves") == Some(0)
            && field(c"repl_backlog_active") == Some(0);
        raw::RedisModule_FreeServerInfo.expect("FreeServerInfo")(ctx, info);
        if idle {
            Replication::Idle
        } else {
            Replication::Live
        }
    }
}

/// True when replicas or a replication backlog may receive what a command
/// propagates.
pub fn replicating(ctx: &Context) -> bool {
    let state = REPLICATION.with(|r| {
        if r.get() == Replication::Unknown {
            r.set(read_replication(ctx.get_raw()));
        }
        r.get()
    });
    state == Replication::Live
}

/// True when a write must be propagated as its effect: the AOF is on, or
/// replicas or a backlog may receive it. `flags` are the command's context
/// flags.
pub fn propagating(ctx: &Context, flags: c_int) -> bool {
    flags & raw::REDISMODULE_CTX_FLAGS_AOF as c_int != 0 || replicating(ctx)
}

/// The classes of keyspace events (`REDISMODULE_NOTIFY_*` bits) that could
/// reach anyone now.
pub fn announced_classes() -> c_int {
    if OTHER_MODULES.with(Cell::get) {
        return !0;
    }
    // SAFETY: a plain read of the server's notification flags.
    unsafe { raw::RedisModule_GetNotifyKeyspaceEvents.expect("GetNotifyKeyspaceEvents")() }
}

unsafe extern "C" fn replication_may_have_changed(
    _ctx: *mut raw::RedisModuleCtx,
    eid: raw::RedisModuleEvent,
    _subevent: u64,
    _data: *mut c_void,
) {
    REPLICATION.with(|r| r.set(Replication::Unknown));
    if eid.id == raw::REDISMODULE_EVENT_LOADING {
        // A load (a restart's, DEBUG RELOAD, a full sync) replaces the data
        // without keyspace events.
        leases::forget_all(None);
    }
}

unsafe extern "C" fn module_loaded(
    _ctx: *mut raw::RedisModuleCtx,
    _eid: raw::RedisModuleEvent,
    subevent: u64,
    data: *mut c_void,
) {
    if subevent != raw::REDISMODULE_SUBEVENT_MODULE_LOADED || data.is_null() {
        return;
    }
    // SAFETY: for module change events Redis passes a RedisModuleModuleChange
    // whose name is a NUL-terminated string.
    let name =
        unsafe { CStr::from_ptr((*(data as *const raw::RedisModuleModuleChange)).module_name) };
    if name != MODULE_NAME {
        OTHER_MODULES.with(|o| o.set(true));
    }
}

/// Modules loaded before this one: MODULE LIST does not list this one yet.
fn others_loaded(ctx: &Context) -> bool {
    match ctx.call("MODULE", &["LIST"]) {
        Ok(RedisValue::Array(modules)) => !modules.is_empty(),
        _ => true,
    }
}

/// Subscribes to the server events that change who observes; called at load.
pub fn init(ctx: &Context) -> Result<(), &'static str> {
    let event = |id| raw::RedisModuleEvent { id, dataver: 1 };
    let changes = [
        raw::REDISMODULE_EVENT_FORK_CHILD,
        raw::REDISMODULE_EVENT_REPLICA_CHANGE,
        raw::REDISMODULE_EVENT_MASTER_LINK_CHANGE,
        raw::REDISMODULE_EVENT_LOADING,
    ];
    let mut subscribed = changes.into_iter().all(|id| {
        raw::subscribe_to_server_event(ctx.get_raw(), event(id), Some(replication_may_have_changed))
            == raw::Status::Ok
    });
    subscribed &= raw::subscribe_to_server_event(
        ctx.get_raw(),
        event(raw::REDISMODULE_EVENT_MODULE_CHANGE),
        Some(module_loaded),
    ) == raw::Status::Ok;
    if !subscribed {
        return Err("cannot subscribe to server events");
    }
    OTHER_MODULES.with(|o| o.set(others_loaded(ctx)));
    REPLICATION.with(|r| r.set(read_replication(ctx.get_raw())));
    Ok(())
}
