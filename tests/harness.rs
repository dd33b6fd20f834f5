//! Tests of the test harness itself, against plain redis-server (no module),
//! so they pass before the module exists.

use redis::Commands;
use std::time::Duration;
use testkit::{
    config_value, enable_keyspace_events, events_on, events_str, pid_alive, query, Collector,
    Server,
};

#[test]
fn plain_server_set_get() {
    let server = Server::start_plain(&[]);
    let mut conn = server.conn();
    let _: () = conn.set("k", "v").expect("SET");
    let v: String = conn.get("k").expect("GET");
    assert_eq!(v, "v");
    assert!(server.dir().is_dir());
    assert!(server.url().contains(&server.port.to_string()));
    assert!(server.log().contains("Ready to accept connections"));
    // Defaults applied: no persistence.
    assert_eq!(config_value(&mut conn, "save"), "");
}

#[test]
fn extra_args_override_defaults() {
    let server = Server::start_plain(&["--appendonly", "yes", "--hz", "50"]);
    let mut conn = server.conn();
    assert_eq!(config_value(&mut conn, "appendonly"), "yes");
    assert_eq!(config_value(&mut conn, "hz"), "50");
}

#[test]
fn collector_sees_keyspace_event_and_publish() {
    let server = Server::start_plain(&[]);
    let mut conn = server.conn();
    enable_keyspace_events(&mut conn);
    let collector = Collector::start(
        &server,
        &["__keyspace@0__:*", "__keyevent@0__:*", "redisson_rwlock:*"],
    );

    // Nothing yet.
    assert!(collector.sync(&mut conn).is_empty());

    let _: () = conn.set("lockname", "1").expect("SET");
    let n: i64 = query(&mut conn, &["PUBLISH", "redisson_rwlock:x", "0"]);
    assert_eq!(n, 1);
    let _: () = conn.set("unrelated", "2").expect("SET");

    let events = collector.sync(&mut conn);
    let s = events_str(&events);
    assert_eq!(
        s,
        vec![
            ("__keyspace@0__:lockname".to_string(), "set".to_string()),
            ("__keyevent@0__:set".to_string(), "lockname".to_string()),
            ("redisson_rwlock:x".to_string(), "0".to_string()),
            ("__keyspace@0__:unrelated".to_string(), "set".to_string()),
            ("__keyevent@0__:set".to_string(), "unrelated".to_string()),
        ],
        "{s:?}"
    );
    assert_eq!(
        events_on(&events, "redisson_rwlock:"),
        vec![("redisson_rwlock:x".to_string(), "0".to_string())]
    );

    // sync drained everything: the next sync only sees new messages.
    assert!(collector.sync(&mut conn).is_empty());
    let _: () = conn.del("lockname").expect("DEL");
    let events = events_str(&collector.sync(&mut conn));
    assert_eq!(
        events,
        vec![
            ("__keyspace@0__:lockname".to_string(), "del".to_string()),
            ("__keyevent@0__:del".to_string(), "lockname".to_string()),
        ]
    );

    // Asynchronous events: wait_for an expiry.
    let _: () = redis::cmd("SET")
        .arg("short")
        .arg("1")
        .arg("PX")
        .arg(50)
        .query(&mut conn)
        .expect("SET PX");
    let got = collector.wait_for(Duration::from_secs(5), |c, p| {
        c == b"__keyevent@0__:expired" && p == b"short"
    });
    assert!(
        got.is_some(),
        "no expired event: {:?}",
        collector.snapshot()
    );
}

#[test]
fn collector_catch_all_pattern_hides_markers() {
    let server = Server::start_plain(&[]);
    let mut conn = server.conn();
    let collector = Collector::start(&server, &["*"]);
    let _: i64 = query(&mut conn, &["PUBLISH", "a", "b"]);
    for _ in 0..3 {
        let events = events_str(&collector.sync(&mut conn));
        // The marker channel also matches "*", but markers are never returned.
        assert!(events.iter().all(|(c, _)| c == "a"), "{events:?}");
    }
    let events = collector.take();
    assert!(events_str(&events).iter().all(|(c, _)| c == "a"));
}

#[test]
fn restart_preserves_data_with_aof() {
    let mut server = Server::start_plain(&["--appendonly", "yes", "--appendfsync", "always"]);
    let port = server.port;
    let dir = server.dir().to_path_buf();
    {
        let mut conn = server.conn();
        let _: () = conn.set("persisted", "yes").expect("SET");
        let _: () = redis::cmd("SET")
            .arg("with_ttl")
            .arg("1")
            .arg("PX")
            .arg(600_000)
            .query(&mut conn)
            .expect("SET PX");
    }
    let old_pid = server.pid();

    // Graceful restart.
    server.restart();
    assert_eq!(server.port, port);
    assert_eq!(server.dir(), dir.as_path());
    assert_ne!(server.pid(), old_pid);
    assert!(!pid_alive(old_pid));
    {
        let mut conn = server.conn();
        let v: Option<String> = conn.get("persisted").expect("GET");
        assert_eq!(v.as_deref(), Some("yes"));
        let pttl: i64 = conn.pttl("with_ttl").expect("PTTL");
        assert!(pttl > 500_000, "pttl {pttl}");
        let _: () = conn.set("after_restart", "1").expect("SET");
    }

    // Crash (SIGKILL) and restart: fsync always keeps acknowledged writes.
    server.kill9();
    assert!(!server.is_running());
    server.restart();
    let mut conn = server.conn();
    let v: Option<String> = conn.get("after_restart").expect("GET");
    assert_eq!(v.as_deref(), Some("1"));
    let v: Option<String> = conn.get("persisted").expect("GET");
    assert_eq!(v.as_deref(), Some("yes"));
}

#[test]
fn drop_stops_process_and_removes_dir() {
    let server = Server::start_plain(&[]);
    let pid = server.pid();
    let dir = server.dir().to_path_buf();
    assert!(pid_alive(pid));
    let collector = Collector::start(&server, &["__keyspace@0__:*"]);
    drop(collector);
    drop(server);
    assert!(!pid_alive(pid), "redis-server {pid} still alive after drop");
    assert!(!dir.exists(), "{} not removed", dir.display());
}

#[test]
fn collector_survives_server_death() {
    // A collector whose server dies must not hang its drop.
    let mut server = Server::start_plain(&[]);
    let collector = Collector::start(&server, &["*"]);
    server.kill9();
    let t = std::time::Instant::now();
    drop(collector);
    assert!(t.elapsed() < Duration::from_secs(5));
}

#[test]
fn two_servers_get_distinct_ports_and_dirs() {
    let a = Server::start_plain(&[]);
    let b = Server::start_plain(&[]);
    assert_ne!(a.port, b.port);
    assert_ne!(a.dir(), b.dir());
    let mut ca = a.conn();
    let mut cb = b.conn();
    let _: () = ca.set("x", "a").expect("SET a");
    let v: Option<String> = cb.get("x").expect("GET b");
    assert_eq!(v, None);
}

#[test]
#[should_panic(expected = "redis-server exited during startup")]
fn startup_failure_reports_log() {
    let _server = Server::start_plain(&["--no-such-option", "1"]);
}
