//! The blocking client's connections: borrowed from the client's pool for
//! one call (an acquisition, whose `BLOCK` parks it; a release), kept by a
//! session's guard as long as its hold (the server binds the hold to it),
//! and one per watchdog; each with the read timeout its call needs.

use std::time::Duration;

use redis::Connection;

use crate::error::Result;
use crate::pool::Pool;

/// A connection made within `timeout` whose replies are awaited as long
/// (None: no limit).
pub(crate) fn connect(client: &redis::Client, timeout: Option<Duration>) -> Result<Connection> {
    let conn = match timeout {
        Some(t) => client.get_connection_with_timeout(t)?,
        None => client.get_connection()?,
    };
    conn.set_read_timeout(timeout)?;
    Ok(conn)
}

/// A connection to `client`'s server for one call whose replies are
/// awaited at most `timeout` (None: no limit): an idle one of `pool` when
/// `reuse`, else a new one made within `connect_timeout`. A call that
/// cannot be sent again after a lost reply does not reuse one: an idle
/// connection the server closed meanwhile would fail it.
pub(crate) fn checkout(
    pool: &Pool<Connection>,
    client: &redis::Client,
    reuse: bool,
    connect_timeout: Option<Duration>,
    timeout: Option<Duration>,
) -> Result<Connection> {
    let idle = if reuse { pool.take(client) } else { None };
    let conn = match idle {
        Some(conn) => conn,
        None => connect(client, connect_timeout)?,
    };
    conn.set_read_timeout(timeout)?;
    Ok(conn)
}
