//! Lock messages on Redisson's channel, as PUBLISH (or SPUBLISH) would send
//! them. A module's own publish reaches this node's subscribers (and, in a
//! cluster, the other nodes, as the commands do), but not the replication
//! stream, which PUBLISH outside a cluster also feeds for subscribers on
//! replicas: then, and only then, the command itself runs through RM_Call.

use std::os::raw::c_int;

use redis_module::{raw, CallOptionsBuilder, CallResult, Context};

use super::observers;
use crate::config::{self, PublishMode};
use crate::server::{self, strings, RawString};

/// Publishes `message` (from `shared`, a string that outlives the call) on
/// `channel`; `flags` are the command's context flags.
pub fn publish(ctx: &Context, flags: c_int, channel: &[u8], message: RawString) {
    let cluster = flags & raw::REDISMODULE_CTX_FLAGS_CLUSTER as c_int != 0;
    let shard = match config::publish_mode() {
        PublishMode::auto => cluster,
        PublishMode::publish => false,
        PublishMode::spublish => true,
    };
    if !cluster && observers::replicating(ctx) {
        let command = if shard { "SPUBLISH" } else { "PUBLISH" };
        let options = CallOptionsBuilder::new()
            .replicate()
            .errors_as_replies()
            .build();
        let message = strings::bytes(message);
        let reply: CallResult = ctx.call_ext(command, &options, &[channel, message]);
        if let Err(e) = reply {
            ctx.log_warning(&format!("rwlock: {command} failed: {e}"));
        }
        return;
    }
    let channel = strings::interned(channel);
    server::publish_message(ctx, shard, channel.inner, message);
}
