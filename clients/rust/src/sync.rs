//! The replica check after an acquisition, as every client of the
//! contract does it on the acquisition's connection: `INFO replication
//! persistence`; with replicas, `WAIT <all of them> <timeout>`; where the
//! master writes an AOF, `WAITAOF 1 0 <timeout>`; what is sent and how the
//! replies are read, for both clients.

use std::time::Duration;

use redis::Value;

use crate::command::millis;
use crate::error::{Error, Result};
use crate::options::SyncOptions;

/// What the check needs to know of the master that granted a hold.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Master {
    /// Its connected replicas (`connected_slaves`).
    pub replicas: usize,
    /// It writes an append-only file (`aof_enabled:1`).
    pub aof: bool,
}

/// `INFO replication persistence`: the replicas and the AOF, in one call.
pub(crate) fn info() -> redis::Cmd {
    let mut cmd = redis::cmd("INFO");
    cmd.arg("replication").arg("persistence");
    cmd
}

impl Master {
    /// Reads `INFO`'s `connected_slaves` and `aof_enabled` (absent: none).
    pub fn of(info: &str) -> Master {
        let field = |name: &str| {
            info.lines()
                .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
                .map(str::trim)
        };
        Master {
            replicas: field("connected_slaves")
                .and_then(|n| n.parse().ok())
                .unwrap_or(0),
            aof: field("aof_enabled") == Some("1"),
        }
    }
}

/// `WAIT <replicas> <timeout>`: replies how many acknowledged.
pub(crate) fn wait(replicas: usize, options: &SyncOptions) -> redis::Cmd {
    let mut cmd = redis::cmd("WAIT");
    cmd.arg(replicas).arg(millis(options.timeout));
    cmd
}

/// `WAITAOF 1 0 <timeout>`: the master fsynced the hold to its AOF;
/// replies `[local, replicas]` fsynced.
pub(crate) fn wait_aof(options: &SyncOptions) -> redis::Cmd {
    let mut cmd = redis::cmd("WAITAOF");
    cmd.arg(1).arg(0).arg(millis(options.timeout));
    cmd
}

/// A `WAITAOF`'s reply; None when the server does not know `WAITAOF`
/// (Redis before 7.2), where `WAIT` alone is the check.
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

/// Ok when `WAIT`'s reply says every one of the master's `replicas`
/// acknowledged, as Redisson requires ("only n of m slaves were synced").
pub(crate) fn waited(reply: &Value, replicas: usize, options: &SyncOptions) -> Result<()> {
    match reply {
        Value::Int(n) if *n >= 0 && *n as usize >= replicas => Ok(()),
        Value::Int(_) => Err(not_synced(replicas, options)),
        other => Err(Error::UnexpectedReply(format!("{other:?}"))),
    }
}

/// Ok when `WAITAOF 1 0`'s reply says the master fsynced it.
pub(crate) fn fsynced(reply: &Value, replicas: usize, options: &SyncOptions) -> Result<()> {
    match reply {
        Value::Array(items) => match items.as_slice() {
            [Value::Int(local), Value::Int(_)] if *local >= 1 => Ok(()),
            [Value::Int(_), Value::Int(_)] => Err(not_synced(replicas, options)),
            _ => Err(Error::UnexpectedReply(format!("{items:?}"))),
        },
        other => Err(Error::UnexpectedReply(format!("{other:?}"))),
    }
}

fn not_synced(replicas: usize, options: &SyncOptions) -> Error {
    Error::NotSynced {
        replicas,
        waited: options.timeout,
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

    #[test]
    fn info_tells_the_replicas_and_the_aof() {
        let info = "# Replication\r\nrole:master\r\nconnected_slaves:2\r\n\
                    # Persistence\r\naof_enabled:1\r\n";
        assert_eq!(
            Master::of(info),
            Master {
                replicas: 2,
                aof: true
            }
        );
        let alone = "role:master\r\nconnected_slaves:0\r\naof_enabled:0\r\n";
        assert_eq!(
            Master::of(alone),
            Master {
                replicas: 0,
                aof: false
            }
        );
    }

    #[test]
    fn acknowledgements() {
        let options = SyncOptions::default();
        assert!(waited(&Value::Int(2), 2, &options).is_ok());
        assert!(matches!(
            waited(&Value::Int(1), 2, &options),
            Err(Error::NotSynced { replicas: 2, .. })
        ));
        let local = Value::Array(vec![Value::Int(1), Value::Int(0)]);
        assert!(fsynced(&local, 0, &options).is_ok());
        let none = Value::Array(vec![Value::Int(0), Value::Int(0)]);
        assert!(matches!(
            fsynced(&none, 0, &options),
            Err(Error::NotSynced { .. })
        ));
        assert!(matches!(
            waited(&Value::Okay, 1, &options),
            Err(Error::UnexpectedReply(_))
        ));
    }
}
