//! One scenario of make bench-clients (benches/clients/run.py) with one
//! library: this repository's client, async ("rwlock"), or rslock ("rslock"),
//! workers being tokio tasks on the default multi-threaded runtime. Warms
//! up, prints READY, runs for --seconds once it reads GO, prints its counts
//! as one JSON line, and releases what it holds once its standard input
//! closes (after run.py read the server's counters).

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rwlock_client::aio::{Client, Guard};
use tokio::io::{AsyncBufReadExt, BufReader};

/// rslock's lease: the watchdog lease our locks take without one (30 s), so
/// that no hold ends on its own during a run.
const LEASE: Duration = Duration::from_secs(30);

/// A worker's handle, whatever the library.
enum Locker {
    Ours {
        lock: rwlock_client::aio::Lock,
        held: Option<Guard>,
    },
    OursRw {
        rw: rwlock_client::aio::ReadWriteLock,
        write: bool,
        held: Option<Guard>,
    },
    Peer {
        waits: rslock::LockManager,
        tries: rslock::LockManager,
        name: String,
        held: Option<rslock::Lock>,
    },
}

impl Locker {
    /// Waits for the lock (rslock: its acquire loop, retrying without end).
    async fn lock(&mut self) {
        match self {
            Locker::Ours { lock, held } => *held = Some(lock.acquire().await.expect("acquire")),
            Locker::OursRw { rw, write, held } => {
                let guard = if *write {
                    rw.write().await
                } else {
                    rw.read().await
                };
                *held = Some(guard.expect("acquire"));
            }
            Locker::Peer {
                waits, name, held, ..
            } => {
                let lock = waits.acquire_no_guard(name.as_bytes(), LEASE).await;
                *held = Some(lock.expect("rslock acquire"));
            }
        }
    }

    /// One attempt; true when it took the lock.
    async fn try_lock(&mut self) -> bool {
        match self {
            Locker::Ours { lock, held } => match lock.try_acquire(Duration::ZERO).await {
                Ok(guard) => {
                    *held = Some(guard);
                    true
                }
                Err(rwlock_client::Error::NotAcquired { .. }) => false,
                Err(e) => panic!("try_acquire: {e}"),
            },
            Locker::OursRw { .. } => unreachable!("the read-write lock runs no refused try"),
            Locker::Peer {
                tries, name, held, ..
            } => match tries.lock(name.as_bytes(), LEASE).await {
                Ok(lock) => {
                    *held = Some(lock);
                    true
                }
                Err(rslock::LockError::Unavailable) => false,
                Err(e) => panic!("rslock lock: {e}"),
            },
        }
    }

    async fn unlock(&mut self) {
        match self {
            Locker::Ours { held, .. } | Locker::OursRw { held, .. } => {
                held.take().expect("held").release().await.expect("release")
            }
            Locker::Peer { waits, held, .. } => waits.unlock(&held.take().expect("held")).await,
        }
    }
}

/// On one contended lock: from a holder starting its release to the next
/// holder's acquisition returning, when that holder is another worker.
#[derive(Default)]
struct Handoff {
    release_at: Option<Instant>,
    last: Option<usize>,
    samples: Vec<f64>,
    same: u64,
    changes: u64,
}

fn list(values: &[f64]) -> String {
    let items: Vec<String> = values.iter().map(|v| format!("{v:.1}")).collect();
    format!("[{}]", items.join(","))
}

async fn phase(
    scenario: &str,
    workers: &mut Vec<Locker>,
    writer: &mut Option<Locker>,
    seconds: f64,
) -> String {
    let stop = Arc::new(AtomicBool::new(false));
    let handoff = Arc::new(Mutex::new(Handoff::default()));
    let start = Instant::now();
    let mut tasks = Vec::new();
    for (i, mut w) in workers.drain(..).enumerate() {
        let (stop, handoff, scenario) = (stop.clone(), handoff.clone(), scenario.to_string());
        tasks.push(tokio::spawn(async move {
            let mut count = 0u64;
            while !stop.load(Ordering::Relaxed) {
                if scenario == "try" {
                    assert!(!w.try_lock().await, "a try took a held lock");
                    count += 1;
                    continue;
                }
                w.lock().await;
                if scenario == "contended" {
                    let now = Instant::now();
                    let mut h = handoff.lock().unwrap();
                    match h.last {
                        Some(last) if last == i => h.same += 1,
                        Some(_) => {
                            h.changes += 1;
                            let since = now - h.release_at.expect("a release before");
                            h.samples.push(since.as_secs_f64() * 1e6);
                        }
                        None => {}
                    }
                    h.last = Some(i);
                    h.release_at = Some(Instant::now());
                }
                w.unlock().await;
                count += 1;
            }
            (w, count)
        }));
    }
    let writer_task = writer.take().map(|mut w| {
        let stop = stop.clone();
        tokio::spawn(async move {
            let mut waits = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let t0 = Instant::now();
                w.lock().await;
                waits.push(t0.elapsed().as_secs_f64() * 1e6);
                w.unlock().await;
            }
            (w, waits)
        })
    });
    tokio::time::sleep(Duration::from_secs_f64(seconds)).await;
    stop.store(true, Ordering::Relaxed);
    let mut per = Vec::new();
    for task in tasks {
        let (w, count) = task.await.expect("worker");
        workers.push(w);
        per.push(count);
    }
    let mut waits = Vec::new();
    if let Some(task) = writer_task {
        let (w, ws) = task.await.expect("writer");
        *writer = Some(w);
        waits = ws;
    }
    let elapsed = start.elapsed().as_secs_f64();
    let cycles: u64 = per.iter().sum::<u64>() + waits.len() as u64;
    let per_text: Vec<String> = per.iter().map(u64::to_string).collect();
    let mut json = format!(
        "{{\"cycles\":{cycles},\"failed\":0,\"elapsed_s\":{elapsed},\"per_worker\":[{}],\"writer_wait_us\":{}",
        per_text.join(","),
        list(&waits)
    );
    if scenario == "contended" {
        let h = handoff.lock().unwrap();
        json.push_str(&format!(",\"handoff_us\":{}", list(&h.samples)));
        if h.same + h.changes > 0 {
            json.push_str(&format!(
                ",\"same_again\":{}",
                h.same as f64 / (h.same + h.changes) as f64
            ));
        }
    }
    json.push('}');
    json
}

#[tokio::main]
async fn main() {
    let argv: Vec<String> = std::env::args().skip(1).collect();
    let args: HashMap<&str, &str> = argv
        .chunks(2)
        .map(|p| {
            (
                p[0].trim_start_matches("--"),
                p.get(1).map_or("", String::as_str),
            )
        })
        .collect();
    let get = |k: &str, d: &'static str| args.get(k).copied().unwrap_or(d).to_string();
    let port = get("port", "6379");
    let lib = get("lib", "rwlock");
    let scenario = get("scenario", "uncontended");
    let n: usize = get("workers", "1").parse().expect("--workers");
    let seconds: f64 = get("seconds", "3").parse().expect("--seconds");
    let warmup: f64 = get("warmup", "0.5").parse().expect("--warmup");
    let url = format!("redis://127.0.0.1:{port}/");

    let locks = Client::new(redis::Client::open(url.as_str()).expect("client"));
    let waits = rslock::LockManager::new(vec![url.clone()]);
    // A try is one attempt: rslock's retries (3, 0-200 ms apart) are for waits.
    let mut tries = waits.clone();
    tries.set_retry(1, Duration::from_millis(1));
    let make = |name: &str| -> Locker {
        match lib.as_str() {
            "rwlock" => Locker::Ours {
                lock: locks.lock(name),
                held: None,
            },
            "rslock" => Locker::Peer {
                waits: waits.clone(),
                tries: tries.clone(),
                name: name.to_string(),
                held: None,
            },
            other => panic!("unknown library {other}"),
        }
    };

    let mut writer = None;
    let mut holder = None;
    let mut workers: Vec<Locker> = match scenario.as_str() {
        "uncontended" => (0..n).map(|i| make(&format!("bench:u:{i}"))).collect(),
        "contended" => (0..n).map(|_| make("bench:c")).collect(),
        "try" => {
            let mut h = make("bench:t");
            h.lock().await;
            holder = Some(h);
            (0..n).map(|_| make("bench:t")).collect()
        }
        "rw" => {
            assert_eq!(lib, "rwlock", "{lib} has no read-write lock");
            let rw = |write| Locker::OursRw {
                rw: locks.read_write_lock("bench:rw"),
                write,
                held: None,
            };
            writer = Some(rw(true));
            (0..n).map(|_| rw(false)).collect()
        }
        other => panic!("unknown scenario {other}"),
    };

    phase(&scenario, &mut workers, &mut writer, warmup).await;
    let mut input = BufReader::new(tokio::io::stdin()).lines();
    println!("READY");
    let go = input.next_line().await.expect("stdin");
    assert_eq!(go.as_deref(), Some("GO"), "expected GO on standard input");
    println!(
        "{}",
        phase(&scenario, &mut workers, &mut writer, seconds).await
    );
    // run.py reads the server's counters, then closes our input.
    while input.next_line().await.expect("stdin").is_some() {}
    if let Some(mut h) = holder {
        h.unlock().await;
    }
}
