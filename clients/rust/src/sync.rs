//! The replica check after an acquisition (`WAIT`, `WAITAOF`): what is
//! sent and how the replies are read, for both clients.

use std::time::Duration;

use redis::Value;

use crate::command::millis;
use crate::error::{Error, Result};
use crate::options::SyncOptions;

/// The replicas `ROLE` lists on a master (a replica or a sentinel lists
/// none the check could use).
pub(crate) fn replicas(role: &Value) -> usize {
    match role {
        Value::Array(items) => match items.as_slice() {
            [kind, _, Value::Array(replicas)] if is_master(kind) => replicas.len(),
            _ => 0,
        },
        _ => 0,
    }
}

fn is_master(kind: &Value) -> bool {
    match kind {
        Value::BulkString(b) => b.as_slice() == b"master",
        Value::SimpleString(s) => s == "master",
        _ => false,
    }
}

pub(crate) fn role() -> redis::Cmd {
    redis::cmd("ROLE")
}

/// `WAIT <replicas> <timeout>`: replies how many acknowledged.
pub(crate) fn wait(replicas: usize, options: &SyncOptions) -> redis::Cmd {
    let mut cmd = redis::cmd("WAIT");
    cmd.arg(replicas).arg(millis(options.timeout));
    cmd
}

/// `WAITAOF 0 <replicas> <timeout>`: replies `[local, replicas]` fsynced.
pub(crate) fn wait_aof(replicas: usize, options: &SyncOptions) -> redis::Cmd {
    let mut cmd = redis::cmd("WAITAOF");
    cmd.arg(0).arg(replicas).arg(millis(options.timeout));
    cmd
}

/// A `WAITAOF`'s reply; None when the server does not know `WAITAOF`
/// (Redis before 7.2), for `WAIT` to be sent instead.
pub(crate) fn aof_reply(reply: redis::RedisResult<Value>) -> Result<Option<Value>> {
    match reply {
        Ok(v) => Ok(Some(v)),
        Err(e) if lacks_wait_aof(&e) => Ok(None),
        Err(e) => Err(e.into()),
    }
}

fn lacks_wait_aof(e: &redis::RedisError) -> bool {
    e.to_string()
        .to_ascii_lowercase()
        .contains("unknown command")
}

/// Ok when the `WAIT` or `WAITAOF` reply says at least one of `replicas`
/// acknowledged.
pub(crate) fn settled(reply: &Value, replicas: usize, options: &SyncOptions) -> Result<()> {
    verdict(acknowledged(reply)?, replicas, options.timeout)
}

/// How many replicas a `WAIT` or `WAITAOF` reply says acknowledged.
fn acknowledged(reply: &Value) -> Result<i64> {
    match reply {
        Value::Int(n) => Ok(*n),
        Value::Array(items) => match items.as_slice() {
            [_, Value::Int(n)] => Ok(*n),
            _ => Err(Error::UnexpectedReply(format!("{items:?}"))),
        },
        other => Err(Error::UnexpectedReply(format!("{other:?}"))),
    }
}

/// Ok when at least one replica acknowledged, as Redisson requires.
fn verdict(acked: i64, replicas: usize, waited: Duration) -> Result<()> {
    if acked > 0 {
        Ok(())
    } else {
        Err(Error::NotSynced { replicas, waited })
    }
}

/// The read timeout a call waiting `wait` needs on a connection whose
/// calls get `base`.
pub(crate) fn timeout(base: Option<Duration>, wait: Duration) -> Option<Duration> {
    base.map(|t| t + wait)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bulk(s: &str) -> Value {
        Value::BulkString(s.as_bytes().to_vec())
    }

    #[test]
    fn role_lists_a_masters_replicas() {
        let replica = Value::Array(vec![bulk("127.0.0.1"), bulk("7001"), bulk("0")]);
        let master = Value::Array(vec![
            bulk("master"),
            Value::Int(10),
            Value::Array(vec![replica.clone(), replica]),
        ]);
        assert_eq!(replicas(&master), 2);
        let alone = Value::Array(vec![bulk("master"), Value::Int(0), Value::Array(vec![])]);
        assert_eq!(replicas(&alone), 0);
        let slave = Value::Array(vec![bulk("slave"), bulk("h"), Value::Int(1)]);
        assert_eq!(replicas(&slave), 0);
    }

    #[test]
    fn acknowledgements() {
        assert_eq!(acknowledged(&Value::Int(1)).ok(), Some(1));
        let aof = Value::Array(vec![Value::Int(1), Value::Int(0)]);
        assert_eq!(acknowledged(&aof).ok(), Some(0));
        assert!(verdict(1, 2, Duration::from_secs(1)).is_ok());
        assert!(matches!(
            verdict(0, 2, Duration::from_secs(1)),
            Err(Error::NotSynced { replicas: 2, .. })
        ));
    }
}
