//! The blocking client's connections: one per acquisition (a `BLOCK` parks
//! it, a session hold lives as long as it) and one per watchdog, each with
//! the read timeout its calls need.

use std::time::Duration;

use redis::Connection;

use crate::error::Result;

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
