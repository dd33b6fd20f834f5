//! Closed-loop load: many connections on one thread, each cycling through its
//! own requests with `depth` of them in flight (sent as one pipelined batch,
//! as `redis-benchmark -P` does). Every reply is checked.

use std::time::{Duration, Instant};

use crate::resp::{Conn, Expect};

/// One request: its encoded bytes (a command, or a whole MULTI/EXEC) and the
/// replies it must get, in order.
#[derive(Clone)]
pub struct Request {
    pub bytes: Vec<u8>,
    pub expect: Vec<Expect>,
}

impl Request {
    pub fn new(bytes: Vec<u8>, expect: Vec<Expect>) -> Request {
        Request { bytes, expect }
    }
}

/// Sends the requests pipelined in chunks, checking every reply; `what`
/// names the work in a failure.
pub fn pipeline(conn: &mut Conn, requests: &[Request], what: &str) {
    for chunk in requests.chunks(512) {
        let mut bytes = Vec::new();
        for r in chunk {
            bytes.extend_from_slice(&r.bytes);
        }
        conn.send(&bytes);
        for e in chunk.iter().flat_map(|r| &r.expect) {
            e.require(&conn.recv(), what);
        }
    }
}

struct Batch {
    bytes: Vec<u8>,
    expect: Vec<Expect>,
}

struct Client {
    conn: Conn,
    /// Batches by start position in the cycle.
    batches: Vec<Option<Batch>>,
    at: usize,
    len: usize,
    done: bool,
}

impl Client {
    fn new(port: u16, cycle: &[Request], depth: usize) -> Client {
        let len = cycle.len();
        let mut batches: Vec<Option<Batch>> = (0..len).map(|_| None).collect();
        let mut at = 0;
        while batches[at].is_none() {
            let mut batch = Batch {
                bytes: Vec::new(),
                expect: Vec::new(),
            };
            for k in 0..depth {
                let r = &cycle[(at + k) % len];
                batch.bytes.extend_from_slice(&r.bytes);
                batch.expect.extend_from_slice(&r.expect);
            }
            batches[at] = Some(batch);
            at = (at + depth) % len;
        }
        Client {
            conn: Conn::connect(port),
            batches,
            at: 0,
            len,
            done: false,
        }
    }

    fn batch(&self) -> &Batch {
        self.batches[self.at].as_ref().expect("a reachable batch")
    }

    fn send(&mut self) {
        let Client {
            conn, batches, at, ..
        } = self;
        conn.send(&batches[*at].as_ref().expect("a reachable batch").bytes);
    }

    fn finish(&mut self, depth: usize) {
        for i in 0..self.batch().expect.len() {
            let reply = self.conn.recv();
            self.batch().expect[i].require(&reply, "benchmark request failed");
        }
        self.at = (self.at + depth) % self.len;
    }
}

/// Nanoseconds the process `pid` (its main thread: Redis's command thread)
/// has spent on a CPU, from the scheduler's own accounting.
pub fn cpu_ns(pid: u32) -> u64 {
    let path = format!("/proc/{pid}/schedstat");
    std::fs::read_to_string(&path)
        .ok()
        .and_then(|s| s.split_whitespace().next()?.parse().ok())
        .unwrap_or_else(|| panic!("cannot read {path}"))
}

/// What one run measured.
pub struct Throughput {
    /// Requests completed per second of wall-clock time.
    pub per_s: f64,
    /// Server CPU time per request, in microseconds: what the throughput
    /// would be limited by on a quiet machine.
    pub cpu_us: f64,
}

/// Requests completed per second, each client running its own `cycle` of
/// requests with `depth` in flight, and the server's (`pid`) CPU time per
/// request. Counting starts after `warmup` and stops at `warmup + measure`;
/// every client then stops at the end of a cycle, so the keyspace is left as
/// a whole number of cycles leaves it.
pub fn run(
    port: u16,
    pid: u32,
    cycles: &[Vec<Request>],
    depth: usize,
    warmup: Duration,
    measure: Duration,
) -> Throughput {
    let mut clients: Vec<Client> = cycles.iter().map(|c| Client::new(port, c, depth)).collect();
    let begin = Instant::now();
    let (from, until) = (begin + warmup, begin + warmup + measure);
    let mut completed = 0u64;
    for c in &mut clients {
        c.send();
    }
    let mut running = clients.len();
    let (mut cpu_from, mut cpu_until) = (None, None);
    while running > 0 {
        for c in clients.iter_mut().filter(|c| !c.done) {
            c.finish(depth);
            let now = Instant::now();
            if now >= from && cpu_from.is_none() {
                cpu_from = Some(cpu_ns(pid));
            }
            if now >= until && cpu_until.is_none() {
                cpu_until = Some(cpu_ns(pid));
            }
            if now >= from && now < until {
                completed += depth as u64;
            }
            if now >= until && c.at == 0 {
                c.done = true;
                running -= 1;
            } else {
                c.send();
            }
        }
    }
    let cpu = cpu_until.unwrap_or_default() - cpu_from.unwrap_or_default();
    Throughput {
        per_s: completed as f64 / measure.as_secs_f64(),
        cpu_us: cpu as f64 / 1e3 / completed.max(1) as f64,
    }
}
