//! Lease indexes on a live server: a server keeping them from a lock's first
//! lease (`rwlock.lease-index-from 1`) and one keeping none run the same
//! commands, interleaved with every kind of write other clients make to the
//! lock's keys (Redisson's own unlock script, DEL, PEXPIRE, PERSIST, HSET,
//! RENAME, MULTI, SWAPDB, DEBUG RELOAD, FLUSHALL, lease keys running out),
//! and must agree on every reply, field and deadline. INFO shows the index
//! kept, dropped on foreign writes and rebuilt.

use std::thread;
use std::time::Duration;

use redis::Value;
use testkit::Conn;
use testkit::{eval_lua, reply_text, Server};

const LOCK: &str = "orders";
const CHANNEL: &str = "redisson_rwlock:{orders}";
const READERS: usize = 30;

fn owner(i: usize) -> String {
    format!("r{i}:1")
}

fn lease_key(i: usize, n: i64) -> String {
    format!("{{{LOCK}}}:{}:rwlock_timeout:{n}", owner(i))
}

/// Distinct leases, 7 s apart, so a wrong maximum shows in the TTL.
fn lease(i: usize) -> i64 {
    200_000 + 7_000 * i as i64
}

fn show(v: redis::RedisResult<Value>) -> String {
    match v {
        Ok(v) => format!("{v:?}"),
        Err(e) => format!("error {e}"),
    }
}

struct Pair {
    // Kept for their lifetime: a server stops when dropped.
    _indexed: Server,
    _plain: Server,
    ci: Conn,
    cp: Conn,
}

impl Pair {
    fn start() -> Pair {
        let args = ["--enable-debug-command", "yes"];
        let indexed = Server::start_with_module_args(&["lease-index-from", "1"], &args);
        let plain = Server::start_with_module_args(&["lease-index-from", "0"], &args);
        let (ci, cp) = (indexed.conn(), plain.conn());
        Pair {
            _indexed: indexed,
            _plain: plain,
            ci,
            cp,
        }
    }

    /// The same command on both servers; the replies must be equal.
    fn both(&mut self, args: &[&str]) -> String {
        let run = |c: &mut Conn| show(redis::cmd(args[0]).arg(&args[1..]).query(c));
        let (i, p) = (run(&mut self.ci), run(&mut self.cp));
        assert_eq!(i, p, "{args:?}: indexed server vs plain server");
        i
    }

    fn both_lua(&mut self, script: &str, keys: &[&str], args: &[&str]) -> String {
        let i = show(eval_lua(&mut self.ci, script, keys, args));
        let p = show(eval_lua(&mut self.cp, script, keys, args));
        assert_eq!(i, p, "{script}: indexed server vs plain server");
        i
    }

    fn unlock(&mut self, i: usize) -> String {
        self.both(&["RWLOCK.UNLOCK", LOCK, &owner(i), "READ"])
    }

    fn read(&mut self, i: usize) -> String {
        self.both(&["RWLOCK.READ", LOCK, &owner(i), &lease(i).to_string()])
    }

    /// The lock's fields, its keys and every TTL agree (TTLs within the
    /// time between the two reads).
    fn same_state(&mut self, what: &str) {
        let state = |c: &mut Conn| {
            let mut keys: Vec<String> = redis::cmd("KEYS").arg("*").query(c).expect("KEYS");
            keys.sort();
            keys.into_iter()
                .map(|k| {
                    let kind = reply_text(c, &["TYPE", k.as_str()]);
                    let value = match kind.as_str() {
                        "hash" => {
                            let mut f: Vec<(String, String)> =
                                redis::cmd("HGETALL").arg(&k).query(c).expect("HGETALL");
                            f.sort();
                            format!("{f:?}")
                        }
                        "string" => redis::cmd("GET").arg(&k).query(c).expect("GET"),
                        other => other.to_string(),
                    };
                    let pttl: i64 = redis::cmd("PTTL").arg(&k).query(c).expect("PTTL");
                    (k, value, pttl)
                })
                .collect::<Vec<_>>()
        };
        let (i, p) = (state(&mut self.ci), state(&mut self.cp));
        assert_eq!(i.len(), p.len(), "{what}: keys {i:?} vs {p:?}");
        for ((ki, vi, ti), (kp, vp, tp)) in i.iter().zip(&p) {
            assert_eq!((ki, vi), (kp, vp), "{what}");
            assert!(
                (ti - tp).abs() <= 1_000 && (*ti >= 0) == (*tp >= 0),
                "{what}: PTTL of {ki}: {ti} (indexed) vs {tp}"
            );
        }
    }

    fn indexes(&mut self) -> i64 {
        let info = reply_text(&mut self.ci, &["INFO", "rwlock"]);
        info.lines()
            .find_map(|l| l.strip_prefix("rwlock_lease_indexes:"))
            .and_then(|v| v.trim().parse().ok())
            .expect("rwlock_lease_indexes in INFO rwlock")
    }

    /// Every reader takes its lease; one unlock and re-acquisition builds
    /// the index.
    fn fill(&mut self) {
        for i in 0..READERS {
            assert_eq!(self.read(i), "nil");
        }
        assert_eq!(self.unlock(0), "int(0)");
        assert_eq!(self.read(0), "nil");
        assert_eq!(
            self.indexes(),
            1,
            "an unlock among readers builds the index"
        );
        self.same_state("filled");
    }

    /// The longest reader releases: the lock's TTL comes from the index on
    /// one side and from every lease key on the other.
    fn probe(&mut self, what: &str, longest: usize) {
        self.unlock(longest);
        self.same_state(what);
        self.read(longest);
        self.same_state(what);
    }
}

#[test]
fn indexed_and_plain_servers_agree_through_foreign_writes() {
    let mut p = Pair::start();
    let top = READERS - 1;
    p.fill();

    // The module's own keyspace events do not make the index stale.
    p.both(&["CONFIG", "SET", "notify-keyspace-events", "KEA"]);
    p.probe("own events", top);
    assert_eq!(p.indexes(), 1, "the module's own events keep the index");

    // Each foreign write below drops the index; the next unlock rebuilds it.
    let foreign: Vec<(&str, Vec<Vec<String>>)> = vec![
        (
            "DEL of the longest lease",
            vec![vec!["DEL".into(), lease_key(top, 1)]],
        ),
        (
            "PEXPIRE of a short lease past every other",
            vec![vec!["PEXPIRE".into(), lease_key(3, 1), "900000".into()]],
        ),
        (
            "PERSIST of the longest lease",
            vec![vec!["PERSIST".into(), lease_key(top - 1, 1)]],
        ),
        (
            "HSET of a hold count without its lease",
            vec![vec!["HSET".into(), LOCK.into(), owner(5), "2".into()]],
        ),
        (
            "SET of the second lease of that hold",
            vec![vec![
                "SET".into(),
                lease_key(5, 2),
                "1".into(),
                "PX".into(),
                "950000".into(),
            ]],
        ),
        (
            "RENAME of the lock away and back",
            vec![
                vec!["RENAME".into(), LOCK.into(), "elsewhere".into()],
                vec!["RENAME".into(), "elsewhere".into(), LOCK.into()],
            ],
        ),
        (
            "SWAPDB there and back",
            vec![
                vec!["SWAPDB".into(), "0".into(), "1".into()],
                vec!["SWAPDB".into(), "0".into(), "1".into()],
            ],
        ),
        ("DEBUG RELOAD", vec![vec!["DEBUG".into(), "RELOAD".into()]]),
    ];
    let mut longest = top;
    for (what, commands) in &foreign {
        p.probe(&format!("before {what}"), longest);
        assert_eq!(p.indexes(), 1, "before {what}");
        for c in commands {
            let args: Vec<&str> = c.iter().map(String::as_str).collect();
            p.both(&args);
        }
        assert_eq!(p.indexes(), 0, "{what} drops the index");
        p.same_state(what);
        // The reader that wrote last may no longer be the longest: unlock
        // whoever is, as seen by the plain server.
        longest = (0..READERS)
            .max_by_key(|&i| {
                let t: i64 = redis::cmd("PTTL")
                    .arg(lease_key(i, 1))
                    .query(&mut p.cp)
                    .expect("PTTL");
                t
            })
            .expect("readers");
        p.probe(&format!("after {what}"), longest);
    }

    // Redisson's own unlock script among the module's clients.
    testkit::require_lua(testkit::SEED_LUA);
    p.probe("before a script", longest);
    assert_eq!(p.indexes(), 1);
    let prefix = format!("{{{LOCK}}}:{}:rwlock_timeout", owner(7));
    let r = p.both_lua(
        "read_unlock",
        &[LOCK, CHANNEL, &prefix, &format!("{{{LOCK}}}")],
        &["0", &owner(7)],
    );
    assert_eq!(r, "int(0)");
    assert_eq!(p.indexes(), 0, "a script's writes drop the index");
    p.probe("after a script", longest);

    // A transaction mixing a foreign write and module commands.
    p.both(&["MULTI"]);
    p.both(&["HSET", LOCK, &owner(9), "3"]);
    p.both(&["RWLOCK.UNLOCK", LOCK, &owner(9), "READ"]);
    p.both(&["RWLOCK.UNLOCK", LOCK, &owner(longest), "READ"]);
    p.both(&["EXEC"]);
    p.same_state("MULTI");
    p.probe("after MULTI", 11);

    // FLUSHALL, then a fresh lock: nothing of the old index survives.
    p.both(&["FLUSHALL"]);
    assert_eq!(p.indexes(), 0, "FLUSHALL drops every index");
    p.fill();
}

/// Lease keys running out are no foreign write: the index stays, and an
/// expired lease no longer counts. Here a writer holds reads with short
/// leases under a long write lease.
#[test]
fn leases_running_out_keep_the_index_and_stop_counting() {
    let mut p = Pair::start();
    let w = "w:1";
    assert_eq!(p.both(&["RWLOCK.WRITE", LOCK, w, "60000"]), "nil");
    for i in 0..20 {
        let ms = if i < 10 { "300" } else { "90000" };
        assert_eq!(p.both(&["RWLOCK.READ", LOCK, w, ms]), "nil");
    }
    assert_eq!(p.both(&["RWLOCK.UNLOCK", LOCK, w, "READ"]), "int(0)");
    assert_eq!(p.indexes(), 1);
    p.both(&["CONFIG", "SET", "notify-keyspace-events", "KEA"]);
    thread::sleep(Duration::from_millis(600));
    // Touch the expired keys so both servers have deleted them.
    for n in 1..=10 {
        p.both(&["EXISTS", &format!("{{{LOCK}}}:{w}:rwlock_timeout:{n}")]);
    }
    assert_eq!(p.indexes(), 1, "expiring leases keep the index");
    p.same_state("after the short leases ran out");
    // Release every read but the first ten holds (long leases first).
    for _ in 0..9 {
        assert_eq!(p.both(&["RWLOCK.UNLOCK", LOCK, w, "READ"]), "int(0)");
        p.same_state("releasing reads with long leases");
    }
    // Only expired leases remain: the write lease keeps the lock as it is.
    for _ in 0..10 {
        assert_eq!(p.both(&["RWLOCK.UNLOCK", LOCK, w, "READ"]), "int(0)");
        p.same_state("releasing reads whose leases ran out");
    }
    assert_eq!(p.both(&["RWLOCK.UNLOCK", LOCK, w, "WRITE"]), "int(1)");
    assert_eq!(p.indexes(), 0);
    p.same_state("released");
}
