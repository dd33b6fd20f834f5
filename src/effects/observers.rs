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
use std::ffi::CStr;
use std::os::raw::c_int;

use redis_module::{raw, Context, RedisValue};

use crate::server::{self, ServerInfo};

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

fn read_replication(ctx: &Context) -> Replication {
    let Some(info) = ServerInfo::read(ctx, c"replication") else {
        return Replication::Live;
    };
    let idle = info.text_is(c"role", c"master")
        && info.signed(c"connected_slaves") == Some(0)
        && info.signed(c"repl_backlog_active") == Some(0);
    if idle {
        Replication::Idle
    } else {
        Replication::Live
    }
}

/// True when replicas or a replication backlog may receive what a command
/// propagates.
pub fn replicating(ctx: &Context) -> bool {
    let state = REPLICATION.with(|r| {
        if r.get() == Replication::Unknown {
            r.set(read_replication(ctx));
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
    server::notify_classes()
}

/// A fork (every full sync starts with one), a replica or master link
/// change, or a load: replicas and the backlog are read again before the
/// next write.
pub fn replication_may_have_changed() {
    REPLICATION.with(|r| r.set(Replication::Unknown));
}

/// A module named `name` was loaded: it may subscribe to keyspace events.
pub fn module_loaded(name: &CStr) {
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

/// Reads who observes, at load.
pub fn init(ctx: &Context) {
    OTHER_MODULES.with(|o| o.set(others_loaded(ctx)));
    REPLICATION.with(|r| r.set(read_replication(ctx)));
}
