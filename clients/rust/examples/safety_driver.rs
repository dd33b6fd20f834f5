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
//! [`Locks`] talks to one server, so the driver asks a Sentinel for the
//! master (`SENTINEL GET-MASTER-ADDR-BY-NAME`, again after any failure and
//! at least every second) and points its one [`Locks`] at it
//! ([`Locks::with_master`]): what it learned of the replicas is the
//! deployment's, so a promoted replica is expected to have as many as the
//! old master (docs/safety.md, seed 12). (redis-rs's `sentinel` feature
//! would also connect to the announced address to check the role, past
//! the proxy of this client group that the harness cuts off.)

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::time::{Duration, Instant};

use rwlock_client::{Error, Guard, Locks};
use serde_json::{json, Value};

/// A hold the harness asked for: its guard while the acquisition's
/// connection is usable, else released through the master of the moment.
struct Attempt {
    lock: String,
    guard: Option<Guard>,
}

struct Driver {
    sentinels: Vec<redis::Client>,
    master_name: String,
    nat: HashMap<String, String>,
    timeout: Duration,
    master: Option<(String, Instant)>,
    /// The client, and the address of the master it was last pointed at.
    locks: Option<(String, Locks)>,
    attempts: HashMap<String, Attempt>,
}

impl Driver {
    /// The current master's `Locks`: asked of the Sentinels when not known,
    /// after a failure, or known for a second.
    fn locks(&mut self) -> Result<Locks, String> {
        let known = self
            .master
            .as_ref()
            .filter(|(_, at)| at.elapsed() < Duration::from_secs(1))
            .map(|(address, _)| address.clone());
        let address = match known {
            Some(address) => address,
            None => {
                let address = self.ask_sentinels()?;
                self.master = Some((address.clone(), Instant::now()));
                address
            }
        };
        match &self.locks {
            Some((at, locks)) if *at == address => Ok(locks.clone()),
            known => {
                let client =
                    redis::Client::open(format!("redis://{address}")).map_err(|e| e.to_string())?;
                let locks = match known {
                    Some((_, locks)) => locks.clone().with_master(client),
                    None => Locks::new(client),
                };
                self.locks = Some((address, locks.clone()));
                Ok(locks)
            }
        }
    }

    fn ask_sentinels(&self) -> Result<String, String> {
        let mut why = String::from("no Sentinel");
        for sentinel in &self.sentinels {
            let asked = sentinel
                .get_connection_with_timeout(self.timeout)
                .and_then(|mut conn| {
                    conn.set_read_timeout(Some(self.timeout))?;
                    redis::cmd("SENTINEL")
                        .arg("GET-MASTER-ADDR-BY-NAME")
                        .arg(&self.master_name)
                        .query::<Option<(String, u16)>>(&mut conn)
                });
            match asked {
                Ok(Some((host, port))) => {
                    let announced = format!("{host}:{port}");
                    return Ok(self.nat.get(&announced).cloned().unwrap_or(announced));
                }
                Ok(None) => why = format!("{sentinel:?} knows no master"),
                Err(e) => why = e.to_string(),
            }
        }
        Err(why)
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
                self.master = None;
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
                self.master = None;
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
                self.master = None;
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
    let sentinels = var("SAFETY_SENTINELS")
        .split(',')
        .map(|s| redis::Client::open(format!("redis://{s}")).expect("a Sentinel's address"))
        .collect();
    let nat = var("SAFETY_NAT")
        .split(',')
        .filter_map(|pair| pair.split_once('='))
        .map(|(announced, reachable)| (announced.to_string(), reachable.to_string()))
        .collect();
    let mut driver = Driver {
        sentinels,
        master_name: var("SAFETY_MASTER_NAME"),
        nat,
        timeout: Duration::from_millis(timeout_ms),
        master: None,
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
