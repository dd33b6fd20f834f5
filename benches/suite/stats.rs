//! Server cost as the server counts it: `INFO commandstats`. A command's
//! `usec` covers its own execution (a script's with every call it makes), not
//! the reading of the request or the writing of the reply, so the load
//! generator, the network and the scheduler's accounting of I/O stay out of
//! the comparison: what is left is the work each implementation makes the
//! server do.

use std::collections::BTreeMap;

use crate::resp::{command, Conn, Reply};

#[derive(Clone, Copy, Default)]
pub struct Stat {
    pub calls: u64,
    pub usec: u64,
}

/// Commands by name (lower case, as Redis lists them) since the last reset.
pub struct Stats(BTreeMap<String, Stat>);

/// Zeroes the server's command counters (`CONFIG RESETSTAT`).
pub fn reset(conn: &mut Conn) {
    assert_eq!(conn.call(&["CONFIG", "RESETSTAT"]), Reply::Status);
}

fn field(stats: &str, name: &str) -> Option<u64> {
    stats
        .split(',')
        .find_map(|kv| kv.strip_prefix(name)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
}

/// The server's command counters now.
pub fn read(conn: &mut Conn) -> Stats {
    conn.send(&command(&["INFO", "commandstats"]));
    let info = String::from_utf8(conn.recv_bulk()).expect("INFO is text");
    Stats(
        info.lines()
            .filter_map(|l| {
                let (name, stats) = l.strip_prefix("cmdstat_")?.split_once(':')?;
                let stat = Stat {
                    calls: field(stats, "calls")?,
                    usec: field(stats, "usec")?,
                };
                Some((name.to_string(), stat))
            })
            .collect(),
    )
}

impl Stats {
    /// Server microseconds per call of `names` taken together. Panics when
    /// none of them ran: a variant that sent nothing measured nothing.
    pub fn usec_per_call(&self, names: &[&str]) -> f64 {
        let total = names.iter().fold(Stat::default(), |sum, name| {
            let s = self.0.get(*name).copied().unwrap_or_default();
            Stat {
                calls: sum.calls + s.calls,
                usec: sum.usec + s.usec,
            }
        });
        assert!(
            total.calls > 0,
            "no calls of {names:?} in INFO commandstats"
        );
        total.usec as f64 / total.calls as f64
    }
}

/// Resets the counters, runs `work` on the connection, and returns the
/// server microseconds per call of `names` it made.
pub fn cost(conn: &mut Conn, names: &[&str], work: impl FnOnce(&mut Conn)) -> f64 {
    reset(conn);
    work(conn);
    read(conn).usec_per_call(names)
}
