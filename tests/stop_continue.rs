//! Why the tests talk through `testkit::Conn`: a test process that is
//! stopped and continued (what CI sandboxes do to their jobs) while one of
//! its threads waits for a reply. Linux fails that wait with EINTR when the
//! socket has a read timeout (signal(7)); `redis::Connection` returns it as
//! the command's error, `testkit::Conn` reads again and gets the reply.
//!
//! The process stops itself (through a `kill` child), so this suite runs
//! alone in its binary.

use std::process::Command;
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use redis::{RedisResult, Value};
use testkit::{info_field, query, Server, IO_TIMEOUT};

/// The thread id of the calling thread, from /proc/thread-self.
fn thread_id() -> u32 {
    let link = std::fs::read_link("/proc/thread-self").expect("/proc/thread-self");
    let tid = link.file_name().expect("task/<tid>").to_string_lossy();
    tid.parse().expect("a thread id")
}

/// The scheduler state of thread `tid` of this process ('S': sleeping).
fn thread_state(tid: u32) -> char {
    let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat"))
        .expect("/proc/self/task/<tid>/stat");
    // "tid (comm) S ...": the state follows the command's closing paren.
    let after = &stat[stat.rfind(')').expect("(comm)") + 2..];
    after.chars().next().expect("a state")
}

/// Runs `wait` (a `BLPOP` on `key`) in a thread, stops and continues the
/// whole process while that thread sleeps in its read, then pushes to
/// `key`; returns what `wait` returned.
fn across_a_stop(
    server: &Server,
    key: &str,
    wait: impl FnOnce() -> RedisResult<Value> + Send + 'static,
) -> RedisResult<Value> {
    let mut c = server.conn();
    let (tid_tx, tid_rx) = mpsc::channel();
    let waiter = thread::spawn(move || {
        tid_tx.send(thread_id()).expect("send the thread id");
        wait()
    });
    let tid = tid_rx.recv().expect("the waiter's thread id");
    let deadline = Instant::now() + IO_TIMEOUT;
    let blocked = |c: &mut testkit::Conn| info_field(c, "clients", "blocked_clients");
    while blocked(&mut c).as_deref() != Some("1") || thread_state(tid) != 'S' {
        assert!(Instant::now() < deadline, "the BLPOP never blocked");
        thread::sleep(Duration::from_millis(5));
    }
    let pid = std::process::id();
    let status = Command::new("sh")
        .arg("-c")
        .arg(format!("kill -STOP {pid}; sleep 0.2; kill -CONT {pid}"))
        .status()
        .expect("run sh");
    assert!(status.success(), "kill -STOP/-CONT: {status}");
    let pushed: i64 = query(&mut c, &["RPUSH", key, "served"]);
    assert!(pushed <= 1, "RPUSH answered {pushed}");
    waiter.join().expect("the waiter's thread")
}

#[test]
fn a_reply_awaited_across_a_stop_and_continue() {
    let server = Server::start(&[]);
    let blpop = |key: &str| redis::cmd("BLPOP").arg(key).arg(30).clone();

    // testkit::Conn: the read is made again, the reply arrives.
    let mut conn = server.conn();
    let cmd = blpop("kit");
    let got = across_a_stop(&server, "kit", move || cmd.query(&mut conn));
    assert_eq!(
        got.expect("testkit::Conn's reply"),
        Value::Array(vec![
            Value::BulkString(b"kit".to_vec()),
            Value::BulkString(b"served".to_vec()),
        ])
    );

    // redis::Connection with a read timeout, as the tests had it: the stop
    // fails the read. When this changes (a redis crate that reads again),
    // `testkit::Conn` has no reason left to be ours.
    let raw = server
        .client()
        .get_connection_with_timeout(IO_TIMEOUT)
        .expect("connect");
    raw.set_read_timeout(Some(IO_TIMEOUT))
        .expect("set_read_timeout");
    let mut raw = raw;
    let cmd = blpop("raw");
    let got = across_a_stop(&server, "raw", move || cmd.query(&mut raw));
    let error = got.expect_err("redis::Connection's read across a stop");
    assert!(
        error.to_string().contains("os error 4"),
        "expected EINTR, got {error}"
    );
}
