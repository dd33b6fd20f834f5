//! rwlock: Redisson's locks as native Redis commands.
//!
//! `engine` is the pure lock engine; the other modules are the thin shell
//! that binds it to a live server, in one direction: parse (`args`) →
//! decide (`engine`) → apply (`keyspace`, `effects`) → wake waiters
//! (`waiting`), bind holds to connections (`sessions`). Server events
//! arrive in `events`; every call into Redis's C
//! API goes through `server`. docs/design.md describes the layers.

pub mod engine;
// Public for its fuzz tests (tests/engine), which run the parser without a server.
pub mod args;

mod alloc;
mod census;
mod commands;
mod config;
mod disconnect;
mod effects;
mod events;
mod info;
mod keyspace;
mod metrics;
mod reply;
mod server;
mod sessions;
mod waiting;

use redis_module::configuration::ConfigurationFlags;
use redis_module::raw::ModuleOptions;
use redis_module::{raw, redis_module, Context, RedisString, Status};

use crate::engine::error::MAX_MILLIS;
use crate::engine::rwlock::MAX_HOLDS;

/// `MODULE LIST`'s version: major * 10000 + minor * 100 + patch.
const MODULE_VERSION: i32 = {
    const fn number(s: &str) -> i32 {
        let bytes = s.as_bytes();
        let mut i = 0;
        let mut n = 0;
        while i < bytes.len() {
            n = n * 10 + (bytes[i] - b'0') as i32;
            i += 1;
        }
        n
    }
    number(env!("CARGO_PKG_VERSION_MAJOR")) * 10000
        + number(env!("CARGO_PKG_VERSION_MINOR")) * 100
        + number(env!("CARGO_PKG_VERSION_PATCH"))
};

fn init(ctx: &Context, args: &[RedisString]) -> Status {
    let ready = config::apply_module_args(args)
        .and_then(|()| commands::register(ctx))
        .and_then(|()| events::subscribe(ctx).map_err(String::from));
    if let Err(e) = ready {
        ctx.log_warning(&format!("rwlock: {e}"));
        return Status::Err;
    }
    // Keys are opened writable before the command knows whether it writes,
    // so the store signals the keys it changed itself (WATCH, tracking).
    ctx.set_module_options(ModuleOptions::NO_IMPLICIT_SIGNAL_MODIFIED);
    effects::observers::init(ctx);
    // Replaces the crate's own INFO handler, which has no sections of ours.
    raw::register_info_function(ctx.get_raw(), Some(info::info));
    Status::Ok
}

redis_module! {
    name: "rwlock",
    version: MODULE_VERSION,
    allocator: (alloc::ModuleAlloc, alloc::ModuleAlloc),
    data_types: [],
    init: init,
    // Registered by `commands::register`, with argument-free entry points.
    commands: [],
    // Keyspace events: subscribed to on first need, see `events`.
    event_handlers: [],
    configurations: [
        i64: [
            ["default-lease", &config::DEFAULT_LEASE, config::DEFAULT_LEASE_MS, 1, MAX_MILLIS, ConfigurationFlags::DEFAULT, None],
            ["fair-wait", &config::FAIR_WAIT, config::FAIR_WAIT_MS, 0, MAX_MILLIS, ConfigurationFlags::DEFAULT, None],
            ["lease-index-from", &config::LEASE_INDEX_FROM, config::LEASE_INDEX_FROM_DEFAULT, 0, MAX_HOLDS, ConfigurationFlags::DEFAULT, None],
            ["token-gap", &config::TOKEN_GAP, config::TOKEN_GAP_DEFAULT, 0, i64::MAX, ConfigurationFlags::DEFAULT, None],
        ],
        string: [],
        bool: [
            ["deadlock-detection", &config::DEADLOCK_DETECTION, true, ConfigurationFlags::DEFAULT, None],
        ],
        enum: [
            ["publish", &config::PUBLISH, config::PublishMode::auto, ConfigurationFlags::DEFAULT, None],
            ["fairness", &config::FAIRNESS, config::Fairness::none, ConfigurationFlags::DEFAULT, None],
        ],
        module_args_as_configuration: false,
    ]
}
