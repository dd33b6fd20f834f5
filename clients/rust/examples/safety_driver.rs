//! The safety suite's driver for this package (tests/safety, mode
//! rustclient): fenced locks with the default options, on the master that
//! Sentinel names. An example of the package so that it shares the
//! package's build (`make test` compiles the examples with its tests).
//!
//! One JSON object a line on stdin, one reply a line on stdout:
//! `{"op": "acquire", "lock", "owner", "lease_ms"}` -> granted (token,
//! owner) | refused | notsynced | maybe (detail);
//! `{"op": "release", "lock", "owner"}` -> released | notheld | maybe.
//! Environment (set by the harness): `SAFETY_SENTINELS` (host:port,...),
//! `SAFETY_MASTER_NAME`, `SAFETY_NAT` (announced host:port=reachable
//! host:port,...: the harness's proxies), `SAFETY_TIMEOUT_MS` (the
//! Sentinel queries' timeout).
//!
//! One [`Locks`] for the driver's life, made by [`Locks::sentinel`] with
//! the announced addresses mapped to this client group's proxies
//! ([`Sentinels::with_address_map`]): the package asks the Sentinels for
//! the master and follows every failover itself, keeping what it learned
//! of the replicas (the deployment's: a promoted replica is expected to
//! have as many as the old master, docs/safety.md, seed 12).

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::time::Duration;

use rwlock_client::{Error, Guard, Locks, Sentinels};
use serde_json::{json, Value};

/// A hold the harness asked for: its guard while the acquisition's
/// connection is usable, else released through the master of the moment.
struct Attempt {
    lock: String,
    guard: Option<Guard>,
}

struct Driver {
    sentinels: Sentinels,
    /// Made at the first request that finds a master, then kept.
    locks: Option<Locks>,
    attempts: HashMap<String, Attempt>,
}

impl Driver {
    /// The driver's `Locks`, made when the Sentinels first name a master.
    fn locks(&mut self) -> Result<Locks, String> {
        if let Some(locks) = &self.locks {
            return Ok(locks.clone());
        }
        let locks = Locks::sentinel(self.sentinels.clone()).map_err(|e| e.to_string())?;
        self.locks = Some(locks.clone());
        Ok(locks)
    }

    fn acquire(&mut self, lock: &str, owner: &str, lease_ms: u64) -> Value {
        let locks = match self.locks() {
            Ok(locks) => locks,
            Err(why) => return json!({"outcome": "refused", "detail": format!("no master: {why}")}),
        };
        let handle = locks
            .fenced_lock(lock)
            .with_lease(Duration::from_millis(lease_ms))
            .with_owner(owner);
        match handle.try_acquire(Duration::ZERO) {
            Ok(guard) => {
                let reply =
                    json!({"outcome": "granted", "token": guard.token(), "owner": guard.owner()});
                let attempt = Attempt {
                    lock: lock.to_string(),
                    guard: Some(guard),
                };
                self.attempts.insert(owner.to_string(), attempt);
                reply
            }
            Err(Error::NotAcquired { .. }) => json!({"outcome": "refused"}),
            Err(e @ Error::NotSynced { .. }) => {
                // Released by the package, unless that release failed too:
                // the worker's release asks the server.
                let attempt = Attempt {
                    lock: lock.to_string(),
                    guard: None,
                };
                self.attempts.insert(owner.to_string(), attempt);
                json!({"outcome": "notsynced", "detail": e.to_string()})
            }
            Err(e) => {
                if refused_by_server(&e) {
                    return json!({"outcome": "refused", "detail": e.to_string()});
                }
                // May have been granted: the release below is asked.
                let attempt = Attempt {
                    lock: lock.to_string(),
                    guard: None,
                };
                self.attempts.insert(owner.to_string(), attempt);
                json!({"outcome": "maybe", "detail": e.to_string()})
            }
        }
    }

    fn release(&mut self, owner: &str) -> Value {
        let Some(attempt) = self.attempts.get_mut(owner) else {
            return json!({"outcome": "notheld", "detail": "no lock handle"});
        };
        let released = match attempt.guard.take() {
            Some(guard) => guard.release(),
            None => {
                let lock = attempt.lock.clone();
                match self.locks() {
                    Ok(locks) => locks.fenced_lock(&lock).with_owner(owner).unlock(),
                    Err(why) => {
                        return json!({"outcome": "maybe", "detail": format!("no master: {why}")})
                    }
                }
            }
        };
        match released {
            Ok(()) => {
                self.attempts.remove(owner);
                json!({"outcome": "released"})
            }
            Err(Error::NotHeld) => {
                self.attempts.remove(owner);
                json!({"outcome": "notheld"})
            }
            Err(e) => {
                // The guard is spent: a retry releases through the master
                // of the moment, as the same owner.
                json!({"outcome": "maybe", "detail": e.to_string()})
            }
        }
    }
}

/// The server refused the command before writing anything (a replica now,
/// a node loading its data).
fn refused_by_server(e: &Error) -> bool {
    let Error::Redis(e) = e else { return false };
    matches!(e.code(), Some("READONLY") | Some("LOADING"))
}

fn main() {
    let var = |name: &str| std::env::var(name).unwrap_or_else(|_| panic!("{name} is not set"));
    let timeout_ms: u64 = var("SAFETY_TIMEOUT_MS").parse().expect("SAFETY_TIMEOUT_MS");
    let nat: HashMap<String, String> = var("SAFETY_NAT")
        .split(',')
        .filter_map(|pair| pair.split_once('='))
        .map(|(announced, reachable)| (announced.to_string(), reachable.to_string()))
        .collect();
    let sentinels = Sentinels::new(
        var("SAFETY_SENTINELS")
            .split(',')
            .map(|s| format!("redis://{s}")),
        &var("SAFETY_MASTER_NAME"),
    )
    .expect("the Sentinels' addresses")
    .with_timeout(Duration::from_millis(timeout_ms))
    .with_address_map(move |host, port| {
        let announced = format!("{host}:{port}");
        nat.get(&announced)
            .and_then(|reachable| reachable.rsplit_once(':'))
            .and_then(|(host, port)| Some((host.to_string(), port.parse().ok()?)))
            .unwrap_or((host.to_string(), port))
    });
    let mut driver = Driver {
        sentinels,
        locks: None,
        attempts: HashMap::new(),
    };
    let stdout = std::io::stdout();
    for line in std::io::stdin().lock().lines() {
        let line = line.expect("stdin");
        let request: Value = serde_json::from_str(&line).expect("a JSON request");
        let text = |field: &str| request[field].as_str().unwrap_or_default().to_string();
        let reply = if text("op") == "acquire" {
            let lease_ms = request["lease_ms"].as_u64().unwrap_or_default();
            driver.acquire(&text("lock"), &text("owner"), lease_ms)
        } else {
            driver.release(&text("owner"))
        };
        let mut out = stdout.lock();
        writeln!(out, "{reply}").expect("stdout");
        out.flush().expect("stdout");
    }
}
