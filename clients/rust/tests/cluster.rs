//! Locks in a Redis Cluster of three masters with a replica each, reached
//! from one seed node: each lock is taken on its slot's master (followed
//! through `MOVED`), acknowledged by that master's replica, renewed and
//! released there; waits on the server and multi-locks of one hash tag
//! work as on one server. Blocking and async.

use std::process::{Command, Stdio};
use std::thread;
use std::time::{Duration, Instant};

use rwlock_client::{aio, Client, Options};
use testkit::{info_field, query, run_bounded, wait_until, Server};

fn node_args() -> Vec<&'static str> {
    vec![
        "--cluster-enabled",
        "yes",
        "--cluster-config-file",
        "nodes.conf",
        "--cluster-node-timeout",
        "3000",
        "--cluster-replica-no-failover",
        "yes",
        "--repl-diskless-sync-delay",
        "0",
    ]
}

/// Six nodes made three masters with a replica each, every master's
/// replica streaming (a `WAIT 1` answered).
fn cluster() -> Vec<Server> {
    let nodes: Vec<Server> = (0..6)
        .map(|_| Server::start_cluster_node(&[], &node_args()))
        .collect();
    let addrs: Vec<String> = nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port))
        .collect();
    let (created, output) = run_bounded(
        Command::new("redis-cli")
            .arg("--cluster")
            .arg("create")
            .args(&addrs)
            .args(["--cluster-replicas", "1", "--cluster-yes"])
            .stdin(Stdio::null()),
        Duration::from_secs(60),
    );
    assert!(created, "redis-cli --cluster create:\n{output}");
    for node in &nodes {
        let mut conn = node.conn();
        wait_until(Duration::from_secs(30), "the cluster up", || {
            let info: String = query(&mut conn, &["CLUSTER", "INFO"]);
            info.contains("cluster_state:ok").then_some(())
        });
    }
    for node in &nodes {
        let mut conn = node.conn();
        if info_field(&mut conn, "replication", "role").as_deref() != Some("master") {
            continue;
        }
        wait_until(Duration::from_secs(30), "the replica streaming", || {
            let _: i64 = query(&mut conn, &["PUBLISH", "__rwlock_test_replica", "probe"]);
            let acked: i64 = query(&mut conn, &["WAIT", "1", "100"]);
            (acked == 1).then_some(())
        });
    }
    nodes
}

/// The nodes holding `key`: its master and its replica.
fn holders(nodes: &[Server], key: &str) -> Vec<(u16, String)> {
    nodes
        .iter()
        .filter_map(|n| {
            let mut conn = n.conn();
            // KEYS is answered by any node for its own keys (EXISTS would
            // be redirected to the slot's master).
            let found: Vec<String> = query(&mut conn, &["KEYS", key]);
            let exists = !found.is_empty();
            let role = info_field(&mut conn, "replication", "role").unwrap_or_default();
            exists.then_some((n.port, role))
        })
        .collect()
}

fn waits(nodes: &[Server]) -> u64 {
    nodes
        .iter()
        .map(|n| {
            let info: String = query(&mut n.conn(), &["INFO", "commandstats"]);
            info.lines()
                .find_map(|l| l.strip_prefix("cmdstat_wait:calls="))
                .and_then(|rest| rest.split(',').next())
                .and_then(|c| c.parse::<u64>().ok())
                .unwrap_or(0)
        })
        .sum()
}

#[test]
fn locks_live_on_their_slots_master_and_are_acknowledged_by_its_replica() {
    let nodes = cluster();
    let locks = Client::cluster(nodes[0].client()).with_options(Options {
        response_timeout: Some(Duration::from_millis(500)),
        ..Options::default()
    });
    let before = waits(&nodes);
    let names = ["alpha", "beta", "gamma", "delta", "epsilon", "zeta"];
    let guards: Vec<_> = names
        .iter()
        .map(|name| locks.lock(name).acquire().expect("lock"))
        .collect();
    let write = locks.read_write_lock("orders").write().expect("write");
    let fenced = locks.fenced_lock("invoice").acquire().expect("fenced");
    assert!(fenced.token().is_some());
    let mut masters = std::collections::BTreeSet::new();
    for name in names.iter().chain(&["orders", "invoice"]) {
        let on = holders(&nodes, name);
        let roles: Vec<&str> = on.iter().map(|(_, r)| r.as_str()).collect();
        assert_eq!(roles.len(), 2, "{name}: {on:?}");
        assert!(
            roles.contains(&"master") && roles.contains(&"slave"),
            "{name}: {on:?}"
        );
        masters.extend(on.iter().filter(|(_, r)| r == "master").map(|(p, _)| *p));
    }
    assert!(
        masters.len() >= 2,
        "the locks spread over masters: {masters:?}"
    );
    assert_eq!(
        waits(&nodes) - before,
        8,
        "each acquisition waited for its replica"
    );

    // A multi-lock over one hash tag, and a wait on the server.
    let multi = locks
        .multi_lock()
        .lock("{batch}:a")
        .write("{batch}:b")
        .acquire();
    let other = Client::cluster(nodes[3].client());
    let blocked = thread::spawn(move || {
        let got = other.lock("alpha").try_acquire(Duration::from_secs(10));
        (got.map(|g| g.owner().to_string()), Instant::now())
    });
    thread::sleep(Duration::from_millis(1_000));
    // The waiter cannot be served before the release is sent, however late
    // a loaded machine started its thread.
    let freeing = Instant::now();
    drop(guards);
    let (got, served) = blocked.join().expect("waiter");
    assert!(got.is_ok(), "{got:?}");
    assert!(
        served >= freeing,
        "served {:?} before the release",
        freeing - served
    );
    drop((write, fenced));
    // The multi-lock needs LOCK.ACQUIREALL: checked last, so that the rest
    // is shown on a module without it.
    let multi = multi.expect("a multi-lock of one hash tag");
    drop(multi);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_locks_in_a_cluster() {
    let nodes = cluster();
    let locks = aio::Client::cluster(nodes[1].client());
    let mut guards = Vec::new();
    for name in ["alpha", "beta", "gamma", "delta"] {
        guards.push(locks.lock(name).acquire().await.expect("lock"));
    }
    guards.push(locks.read_write_lock("orders").read().await.expect("read"));
    for name in ["alpha", "beta", "gamma", "delta", "orders"] {
        assert_eq!(
            holders(&nodes, name).len(),
            2,
            "{name} on a master and its replica"
        );
    }
    for guard in guards {
        guard.release().await.expect("release");
    }
    for name in ["alpha", "beta", "gamma", "delta", "orders"] {
        assert!(holders(&nodes, name).is_empty(), "{name} released");
    }
}
