//! The safety suite's driver for this package (tests/safety, mode
//! rustclient): locks of every kind with the default options, on the
//! master that Sentinel names. An example of the package so that it shares
//! the package's build (`make test` compiles the examples with its tests).
//!
//! One JSON object a line on stdin, one reply a line on stdout:
//! `{"op": "acquire", "kind", "lock", "owner", "lease_ms", "wait_ms",
//! "side", "locks"}` -> granted (token, owner) | refused | notsynced |
//! maybe (detail);
//! `{"op": "release", "kind", "lock", "owner"}` -> released | notheld |
//! maybe. kind: fenced, plain, rw (side read or write), fair, multi
//! (locks), session, block (fenced with a wait); `wait_ms` > 0 waits on
//! the server (`BLOCK`).
//! Environment (set by the harness): `SAFETY_SENTINELS` (host:port,...),
//! `SAFETY_MASTER_NAME`, `SAFETY_NAT` (announced host:port=reachable
//! host:port,...: the harness's proxies), `SAFETY_TIMEOUT_MS` (the
//! Sentinel queries' timeout).
//!
//! One [`Client`] for the driver's life, made by [`Client::sentinel`] with
//! the announced addresses mapped to this client group's proxies
//! ([`Sentinels::with_address_map`]): the package asks the Sentinels for
//! the master and follows every failover itself, keeping what it learned
//! of the replicas (the deployment's: a promoted replica is expected to
//! have as many as the old master, docs/safety.md, seed 12).

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::time::Duration;

use rwlock_client::{Client, Error, Guard, Lock, MultiLock, Sentinels};
use serde_json::{json, Value};

/// What the harness asks to take: a kind (`Request::kind`) of one lock,
/// or of several (a multi-lock).
#[derive(Clone)]
struct Request {
    kind: String,
    lock: String,
    read: bool,
    locks: Vec<String>,
}

impl Request {
    fn of(request: &Value) -> Request {
        let text = |field: &str| request[field].as_str().unwrap_or_default().to_string();
        Request {
            kind: text("kind"),
            lock: text("lock"),
            read: text("side") == "read",
            locks: request["locks"]
                .as_array()
                .map(|names| {
                    names
                        .iter()
                        .filter_map(|n| n.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// Takes it with the package's handle for the kind: the read-write
    /// lock's write side, the session and block kinds fenced, as the
    /// harness's command streams are.
    fn acquire(
        &self,
        locks: &Client,
        owner: &str,
        lease: Duration,
        wait: Duration,
    ) -> rwlock_client::Result<Guard> {
        match self.kind.as_str() {
            "rw" => {
                let rw = locks
                    .read_write_lock(&self.lock)
                    .fenced()
                    .with_lease(lease)
                    .with_owner(owner);
                if self.read {
                    rw.try_read(wait)
                } else {
                    rw.try_write(wait)
                }
            }
            "multi" => self.multi(locks, owner).with_lease(lease).try_acquire(wait),
            _ => self.lock(locks, owner).with_lease(lease).try_acquire(wait),
        }
    }

    /// Releases the owner's hold without its guard (spent by a failed
    /// release, or never had: an acquisition of unknown outcome).
    fn unlock(&self, locks: &Client, owner: &str) -> rwlock_client::Result<()> {
        match self.kind.as_str() {
            "rw" => {
                let rw = locks.read_write_lock(&self.lock).fenced().with_owner(owner);
                if self.read {
                    rw.unlock_read()
                } else {
                    rw.unlock_write()
                }
            }
            "multi" => self.multi(locks, owner).unlock(),
            _ => self.lock(locks, owner).unlock(),
        }
    }

    fn lock(&self, locks: &Client, owner: &str) -> Lock {
        let lock = match self.kind.as_str() {
            "plain" => locks.lock(&self.lock),
            "fair" => locks.fair_lock(&self.lock),
            "session" => locks.fenced_lock(&self.lock).with_session(),
            _ => locks.fenced_lock(&self.lock), // fenced, block
        };
        lock.with_owner(owner)
    }

    fn multi(&self, locks: &Client, owner: &str) -> MultiLock {
        self.locks
            .iter()
            .fold(locks.multi_lock(), |multi, name| multi.lock(name))
            .with_owner(owner)
    }
}

/// A hold the harness asked for: its guard while the acquisition's
/// connection is usable, else released through the master of the moment.
struct Attempt {
    request: Request,
    guard: Option<Guard>,
}

struct Driver {
    sentinels: Sentinels,
    /// Made at the first request that finds a master, then kept.
    locks: Option<Client>,
    attempts: HashMap<String, Attempt>,
}

impl Driver {
    /// The driver's `Client`, made when the Sentinels first name a master.
    fn locks(&mut self) -> Result<Client, String> {
        if let Some(locks) = &self.locks {
            return Ok(locks.clone());
        }
        let locks = Client::sentinel(self.sentinels.clone()).map_err(|e| e.to_string())?;
        self.locks = Some(locks.clone());
        Ok(locks)
    }

    fn acquire(&mut self, request: Request, owner: &str, lease_ms: u64, wait_ms: u64) -> Value {
        let locks = match self.locks() {
            Ok(locks) => locks,
            Err(why) => return json!({"outcome": "refused", "detail": format!("no master: {why}")}),
        };
        let lease = Duration::from_millis(lease_ms);
        match request.acquire(&locks, owner, lease, Duration::from_millis(wait_ms)) {
            Ok(guard) => {
                let reply =
                    json!({"outcome": "granted", "token": guard.token(), "owner": guard.owner()});
                let attempt = Attempt {
                    request,
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
                    request,
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
                    request,
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
                let request = attempt.request.clone();
                match self.locks() {
                    Ok(locks) => request.unlock(&locks, owner),
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
            let wait_ms = request["wait_ms"].as_u64().unwrap_or_default();
            driver.acquire(Request::of(&request), &text("owner"), lease_ms, wait_ms)
        } else {
            driver.release(&text("owner"))
        };
        let mut out = stdout.lock();
        writeln!(out, "{reply}").expect("stdout");
        out.flush().expect("stdout");
    }
}
