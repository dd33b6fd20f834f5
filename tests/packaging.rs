//! The Docker recipe without a Docker engine: the scripts the Dockerfile
//! and the compose file run are run here, outside any container. The module
//! build script (whose cargo step `make build` runs on every test run) copies
//! the module out, the entrypoint maps environment variables to module
//! configs, and the compose file's node options with the cluster-init script
//! make a working 3-master cluster. What only an engine could check (the
//! images themselves, the compose network) is not exercised here.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use redis::Value;
use testkit::Conn;
use testkit::{
    call, config_value, expect_reply, module_path, ok, pairs, redis_server_bin, reply_text,
    run_bounded, rwlock_configs, Server,
};

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn docker(file: &str) -> PathBuf {
    repo().join("docker").join(file)
}

fn read(path: &Path) -> String {
    fs::read_to_string(path).unwrap_or_else(|e| panic!("read {}: {e}", path.display()))
}

/// A fresh empty directory under the system temp dir.
fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(testkit::unique(&format!("rwlock-{tag}")));
    fs::create_dir_all(&dir).expect("create temp dir");
    dir
}

#[test]
fn dockerfile_and_compose_run_the_tested_scripts() {
    let dockerfile = read(&docker("Dockerfile"));
    let entrypoint = read(&docker("entrypoint.sh"));
    let compose = read(&docker("compose.yaml"));
    let lines: Vec<&str> = dockerfile.lines().map(str::trim).collect();
    for line in [
        "RUN docker/build-module.sh /out/librwlock.so",
        "COPY --from=build /out/librwlock.so /usr/local/lib/redis/modules/librwlock.so",
        "COPY docker/entrypoint.sh /usr/local/bin/rwlock-entrypoint.sh",
        "COPY docker/cluster-init.sh /usr/local/bin/rwlock-cluster-init.sh",
        "ENTRYPOINT [\"rwlock-entrypoint.sh\"]",
        "FROM redis:7.0",
    ] {
        assert!(lines.contains(&line), "the Dockerfile lacks: {line}");
    }
    // The entrypoint's default module path is where the image puts it.
    assert!(entrypoint.contains("RWLOCK_MODULE_PATH:-/usr/local/lib/redis/modules/librwlock.so"));
    assert!(compose.contains("entrypoint: [\"rwlock-cluster-init.sh\"]"));
    assert!(compose.contains("dockerfile: docker/Dockerfile"));
    // COPY keeps the mode: the scripts must be executable in the tree.
    for script in ["build-module.sh", "entrypoint.sh", "cluster-init.sh"] {
        let mode = fs::metadata(docker(script))
            .expect("script")
            .permissions()
            .mode();
        assert!(mode & 0o111 == 0o111, "{script} is not executable");
    }
    // The build context leaves out the local build.
    let ignore = read(&repo().join(".dockerignore"));
    assert!(ignore
        .lines()
        .any(|l| l.trim().trim_end_matches('/') == "target"));
}

#[test]
fn build_script_copies_the_module_and_the_entrypoint_maps_the_environment() {
    let module = module_path();
    let release = module.parent().expect("module dir");
    assert!(
        release.ends_with("release") && module.ends_with("librwlock.so"),
        "the module under test must be a cargo release build: {}",
        module.display()
    );
    let target = release.parent().expect("target dir");
    let out_dir = temp_dir("image");
    let copied = out_dir.join("modules/librwlock.so");
    // CARGO=true: `make build` already ran this script's cargo step; here it
    // must find the build and copy it where the Dockerfile expects it.
    let (built, output) = run_bounded(
        Command::new(docker("build-module.sh"))
            .arg(&copied)
            .env("CARGO", "true")
            .env("CARGO_TARGET_DIR", target),
        Duration::from_secs(60),
    );
    assert!(built, "build-module.sh failed:\n{output}");
    assert_eq!(
        fs::read(&copied).expect("copied module"),
        fs::read(&module).expect("module"),
        "the copy is the module"
    );
    let copied_str = copied.to_string_lossy().into_owned();
    let server_bin = redis_server_bin();
    let server = Server::start_via(
        &docker("entrypoint.sh"),
        &[
            ("RWLOCK_MODULE_PATH", &copied_str),
            ("REDIS_SERVER", &server_bin),
            ("RWLOCK_PUBLISH", "spublish"),
            ("RWLOCK_FAIRNESS", "fifo"),
            ("RWLOCK_DEFAULT_LEASE", "12345"),
            ("RWLOCK_LEASE_INDEX_FROM", "8"),
            ("RWLOCK_FAIR_WAIT", "4321"),
            ("RWLOCK_DEADLOCK_DETECTION", "no"),
            ("RWLOCK_TOKEN_GAP", "5000"),
        ],
        &[],
    );
    let mut c = server.conn();
    assert_eq!(
        rwlock_configs(&mut c),
        pairs(&[
            ("rwlock.deadlock-detection", "no"),
            ("rwlock.default-lease", "12345"),
            ("rwlock.fair-wait", "4321"),
            ("rwlock.fairness", "fifo"),
            ("rwlock.lease-index-from", "8"),
            ("rwlock.publish", "spublish"),
            ("rwlock.token-gap", "5000"),
        ])
    );
    let modules = ok(&mut c, &["MODULE", "LIST"]);
    assert!(
        format!("{modules:?}").contains(&copied_str),
        "loaded from the copy: {modules:?}"
    );
    expect_reply(&mut c, &["RWLOCK.WRITE", "L", "u:1", "30000"], Value::Nil);
    drop(c);
    drop(server);

    // Nothing set: the module's defaults, redis-server taken from PATH.
    let server = Server::start_via(
        &docker("entrypoint.sh"),
        &[("RWLOCK_MODULE_PATH", &copied_str), ("RWLOCK_FAIRNESS", "")],
        &["--hz", "20"],
    );
    let mut c = server.conn();
    assert_eq!(
        rwlock_configs(&mut c),
        pairs(&[
            ("rwlock.deadlock-detection", "yes"),
            ("rwlock.default-lease", "30000"),
            ("rwlock.fair-wait", "300000"),
            ("rwlock.fairness", "none"),
            ("rwlock.lease-index-from", "64"),
            ("rwlock.publish", "auto"),
            ("rwlock.token-gap", "1000000000"),
        ])
    );
    assert_eq!(
        config_value(&mut c, "hz"),
        "20",
        "the entrypoint passes redis-server options on"
    );
    drop(c);
    drop(server);

    // A bad value stops the server at start, saying why.
    let dir = temp_dir("bad");
    let (started, output) = run_bounded(
        Command::new(docker("entrypoint.sh"))
            // No TCP port: a unix socket of its own, so nothing can clash.
            .args(["--port", "0", "--save", "", "--unixsocket"])
            .arg(dir.join("redis.sock"))
            .arg("--dir")
            .arg(&dir)
            .env("RWLOCK_MODULE_PATH", &copied)
            .env("REDIS_SERVER", &server_bin)
            .env("RWLOCK_FAIRNESS", "sometimes"),
        Duration::from_secs(30),
    );
    assert!(!started, "a bad value must stop the server:\n{output}");
    assert!(
        output.contains("bad value 'sometimes' for fairness"),
        "{output}"
    );
    let _ = fs::remove_dir_all(dir);
    let _ = fs::remove_dir_all(out_dir);
}

/// The `command:` list of the compose file's node template.
fn compose_node_command() -> Vec<String> {
    let compose = read(&docker("compose.yaml"));
    let line = compose
        .lines()
        .map(str::trim)
        .find_map(|l| l.strip_prefix("command: [\"--"))
        .expect("the node template's command line");
    format!("\"--{line}")
        .trim_end_matches(']')
        .split(',')
        .map(|item| item.trim().trim_matches('"').to_string())
        .collect()
}

fn slot_owner_port(conn: &mut Conn, key: &str) -> i64 {
    let slot: i64 = redis::cmd("CLUSTER")
        .arg("KEYSLOT")
        .arg(key)
        .query(conn)
        .expect("KEYSLOT");
    let Value::Array(ranges) = ok(conn, &["CLUSTER", "SLOTS"]) else {
        panic!("CLUSTER SLOTS is an array")
    };
    for range in ranges {
        let Value::Array(r) = range else { continue };
        let (Value::Int(lo), Value::Int(hi)) = (&r[0], &r[1]) else {
            continue;
        };
        if (*lo..=*hi).contains(&slot) {
            let Value::Array(master) = &r[2] else {
                panic!("a master entry")
            };
            let Value::Int(port) = master[1] else {
                panic!("a port")
            };
            return port;
        }
    }
    panic!("slot {slot} of {key} has no owner")
}

#[test]
fn compose_cluster_recipe_forms_a_working_cluster() {
    let command = compose_node_command();
    assert!(command
        .windows(2)
        .any(|w| w == ["--cluster-enabled", "yes"]));
    let args: Vec<&str> = command.iter().map(String::as_str).collect();
    let module = module_path();
    let module_str = module.to_string_lossy().into_owned();
    let server_bin = redis_server_bin();
    let nodes: Vec<Server> = (0..3)
        .map(|_| {
            Server::start_via(
                &docker("entrypoint.sh"),
                &[
                    ("RWLOCK_MODULE_PATH", &module_str),
                    ("REDIS_SERVER", &server_bin),
                    ("RWLOCK_PUBLISH", "auto"),
                ],
                &args,
            )
        })
        .collect();
    let addresses: Vec<String> = nodes
        .iter()
        .map(|n| format!("127.0.0.1:{}", n.port))
        .collect();
    for round in ["create", "again"] {
        let (done, output) = run_bounded(
            Command::new(docker("cluster-init.sh")).args(&addresses),
            Duration::from_secs(90),
        );
        assert!(done, "cluster-init ({round}) failed:\n{output}");
        assert!(output.contains("cluster-init: cluster ready"), "{output}");
        if round == "again" {
            assert!(output.contains("nothing to create"), "{output}");
        }
    }
    let mut conns: Vec<Conn> = nodes.iter().map(Server::conn).collect();
    for c in &mut conns {
        let info = reply_text(c, &["CLUSTER", "INFO"]);
        assert!(info.contains("cluster_state:ok"), "{info}");
        assert!(info.contains("cluster_size:3"), "{info}");
    }
    // Each lock is served by the master of its slot; the others redirect.
    for lock in ["orders", "{t}:a", "payments"] {
        let port = slot_owner_port(&mut conns[0], lock);
        let owner = nodes
            .iter()
            .position(|n| i64::from(n.port) == port)
            .expect("a node");
        let other = (owner + 1) % 3;
        let moved = call(&mut conns[other], &["RWLOCK.WRITE", lock, "u:1", "30000"])
            .expect_err("a node that does not own the slot redirects");
        let moved = moved.to_string();
        assert!(
            moved.to_ascii_uppercase().contains("MOVED") && moved.contains(&format!(":{port}")),
            "{moved}"
        );
        assert_eq!(
            ok(&mut conns[owner], &["RWLOCK.WRITE", lock, "u:1", "30000"]),
            Value::Nil
        );
        // publish=auto in cluster mode: the release goes out with SPUBLISH
        // on the lock's own shard channel.
        let channel = testkit::channel(lock);
        let mut sub = nodes[owner].conn();
        ok(&mut sub, &["SSUBSCRIBE", &channel]);
        assert_eq!(
            ok(&mut conns[owner], &["RWLOCK.UNLOCK", lock, "u:1", "WRITE"]),
            Value::Int(1)
        );
        sub.set_read_timeout(Some(Duration::from_secs(5)))
            .expect("timeout");
        let push = match sub.recv_response().expect("the release message") {
            Value::Array(items) => items,
            Value::Push { data, .. } => data,
            other => panic!("unexpected {other:?}"),
        };
        assert_eq!(push[0], Value::BulkString(b"smessage".to_vec()));
        assert_eq!(push[1], Value::BulkString(channel.into_bytes()));
        assert_eq!(push[2], Value::BulkString(b"1".to_vec()));
    }
}
