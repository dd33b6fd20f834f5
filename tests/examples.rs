//! The client examples, run against the module as smoke tests: each runs
//! its own checks (mutual exclusion under contention, re-entry, the
//! watchdog keeping a lock past its lease, waiting on the server; for the
//! read-write lock and the plain lock, fenced tokens included) and must pass
//! them; the server's own state and counters are then checked apart from
//! what the example reports.

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use testkit::{all_keys, run_bounded, rwlock_counter, Server};

/// Lines both examples print when their checks pass.
const CHECKS: &[&str] = &[
    "ok: 4 writers x 25 increments = 100, none lost",
    "ok: no writer ever shared the lock",
    "ok: write, read, write again: re-entered",
    "ok: a reader cannot upgrade to write (refused)",
    "ok: another client's reader shares the read lock",
    "ok: without renewal a 1 s lease ends",
    "ok: the watchdog kept the hold for 3.5 leases",
    "ok: a 50 ms wait gives up while the writer holds on",
    "ok: the reader waited on the server until the writer released",
    "ok: 4 workers x 25 increments under the plain lock = 100, none lost",
    "ok: each holder's fencing token is larger than the last holder's",
    "ok: the plain lock re-entered (count 2)",
    "ok: another owner is refused the plain lock",
    "ok: the plain lock released, no latch left",
    "ok: the watchdog kept the plain lock for 3.5 leases",
    "ok: the watchdog stopped when the lock was forced open",
    "all checks passed",
];

const LIMIT: Duration = Duration::from_secs(180);

/// What the server shows after an example's run, whatever it printed.
fn check_server_side(server: &Server, prefix: &str) {
    let mut c = server.conn();
    let get = |c: &mut testkit::Conn, key: &str| -> u64 {
        redis::cmd("GET").arg(key).query(c).expect(key)
    };
    let counter = format!("{prefix}:counter");
    let plain_counter = format!("{prefix}:plain-counter");
    // The fenced lock's token counter stays: nothing deletes it.
    let token = format!("redisson_lock_token:{{{prefix}:plain-lock}}");
    assert_eq!(
        get(&mut c, &counter),
        100,
        "every increment made under the write lock"
    );
    assert_eq!(
        get(&mut c, &plain_counter),
        100,
        "every increment made under the plain lock"
    );
    assert_eq!(get(&mut c, &token), 100, "one token per fenced hold");
    // The clients send `HELD` (docs/design.md §14.8): no latch is written,
    // so nothing but the counters and the fencing token is left.
    let keys = all_keys(&mut c);
    assert_eq!(
        keys,
        HashSet::from([counter, plain_counter, token]),
        "every lock released, no latch left"
    );
    assert!(rwlock_counter(&mut c, "write_acquired") >= 100);
    assert!(rwlock_counter(&mut c, "reentries") >= 2, "write→read→write");
    // 3.5 s under 1 s leases renewed every 333 ms: about ten renewals.
    let renewals = rwlock_counter(&mut c, "renewals");
    assert!(renewals >= 5, "the watchdog renewed {renewals} times");
    assert!(rwlock_counter(&mut c, "waits_served") >= 1);
    assert!(rwlock_counter(&mut c, "waits_timed_out") >= 1);
    assert_eq!(rwlock_counter(&mut c, "waiters"), 0);
    // The plain lock: 100 fenced holds, a re-entered hold, a held 1 s lease.
    assert!(rwlock_counter(&mut c, "lock_acquired") >= 103);
    assert_eq!(rwlock_counter(&mut c, "tokens_issued"), 100);
    // Every release was sent once; the forced-open lock's watchdog stopped
    // on LOCK.RENEW's 0.
    assert_eq!(rwlock_counter(&mut c, "unlocks_replayed"), 0);
    assert_eq!(rwlock_counter(&mut c, "force_unlocks"), 1);
    assert!(rwlock_counter(&mut c, "renewals_not_held") >= 1);
}

fn assert_checks_passed(name: &str, passed: bool, output: &str) {
    assert!(passed, "{name} failed:\n{output}");
    for line in CHECKS {
        assert!(
            output.lines().any(|l| l.starts_with(line)),
            "{name} did not print {line:?}:\n{output}"
        );
    }
    assert!(!output.contains("FAILED"), "{output}");
}

/// The Python example uses the package in clients/python, from its source
/// (ahead of any installed copy), so it runs this checkout's client.
#[test]
fn python_example_with_the_rwlock_client_package() {
    let server = Server::start(&[]);
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let script = root.join("examples/python/rwlock_demo.py");
    let (passed, output) = run_bounded(
        Command::new("python3")
            .env("PYTHONPATH", root.join("clients/python/src"))
            .arg(&script)
            .args(["--port", &server.port.to_string(), "--prefix", "py"]),
        LIMIT,
    );
    assert_checks_passed("examples/python/rwlock_demo.py", passed, &output);
    check_server_side(&server, "py");
}

#[test]
fn rust_example_with_the_client_crate() {
    // cargo test builds the examples next to the test binaries' own folder.
    let exe = std::env::current_exe().expect("test binary path");
    let profile_dir = exe
        .parent()
        .and_then(|deps| deps.parent())
        .expect("target/<profile>");
    let example = profile_dir.join("examples/rwlock_client");
    assert!(
        example.is_file(),
        "{} is missing: `cargo test` builds it (not `cargo test --test examples` alone); \
         or run `cargo build --release --examples`",
        example.display()
    );
    let server = Server::start(&[]);
    let (passed, output) = run_bounded(
        Command::new(&example).args([server.url().as_str(), "rs"]),
        LIMIT,
    );
    assert_checks_passed("examples/rwlock_client.rs", passed, &output);
    check_server_side(&server, "rs");
}

/// The README is a guide, kept to at most 25 KB; detail and measurement
/// logs belong in docs/, which it links.
#[test]
fn readme_stays_a_guide_of_at_most_25_kb() {
    let readme = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("README.md");
    let size = std::fs::metadata(&readme).expect("README.md").len();
    assert!(
        size <= 25_000,
        "README.md is {size} bytes: move detail to docs/ (at most 25,000)"
    );
}
