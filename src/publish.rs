//! Lock messages on Redisson's channel. They go through PUBLISH/SPUBLISH with
//! replication, because a module's own publish never reaches subscribers on
//! replicas.

use redis_module::{CallOptionsBuilder, CallResult, Context, ContextFlags};

use crate::config::{self, PublishMode};

pub fn publish(ctx: &Context, channel: &[u8], message: &[u8]) {
    let command = match config::publish_mode() {
        PublishMode::auto if ctx.get_flags().contains(ContextFlags::CLUSTER) => "SPUBLISH",
        PublishMode::auto | PublishMode::publish => "PUBLISH",
        PublishMode::spublish => "SPUBLISH",
    };
    let options = CallOptionsBuilder::new()
        .replicate()
        .errors_as_replies()
        .build();
    let reply: CallResult = ctx.call_ext(command, &options, &[channel, message]);
    if let Err(e) = reply {
        ctx.log_warning(&format!("rwlock: {command} failed: {e}"));
    }
}
