//! Lock messages on Redisson's channel, as PUBLISH (or SPUBLISH) would send
//! them. A module's own publish reaches this node's subscribers (and, in a
//! cluster, the other nodes, as the commands do), but not the replication
//! stream, which PUBLISH outside a cluster also feeds for subscribers on
//! replicas: then, and only then, the command itself runs through RM_Call.

use std::os::raw::c_int;

use redis_module::{raw, CallOptionsBuilder, CallResult, Context, RedisString};

use crate::config::{self, PublishMode};
use crate::interned;
use crate::observers;

/// Publishes `message` (from `shared`, a string that outlives the call) on
/// `channel`; `flags` are the command's context flags.
pub fn publish(ctx: &Context, flags: c_int, channel: &[u8], message: *mut raw::RedisModuleString) {
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
        let message = RedisString::string_as_slice(message);
        let reply: CallResult = ctx.call_ext(command, &options, &[channel, message]);
        if let Err(e) = reply {
            ctx.log_warning(&format!("rwlock: {command} failed: {e}"));
        }
        return;
    }
    let channel = interned::string(channel);
    // SAFETY: a live context and two valid strings; publishing copies them.
    unsafe {
        if shard {
            raw::RedisModule_PublishMessageShard.expect("PublishMessageShard")(
                ctx.get_raw(),
                channel.inner,
                message,
            );
        } else {
            raw::RedisModule_PublishMessage.expect("PublishMessage")(
                ctx.get_raw(),
                channel.inner,
                message,
            );
        }
    }
}
