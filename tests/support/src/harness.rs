//! Servers, their paths and names, the event collector and bounded runs of
//! other programs.

use std::fmt;
use std::fs::{self, OpenOptions};
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{mpsc, Arc, Mutex};
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use crate::Conn;

/// The prefix of a lock's other keys (docs/design.md, contract §1): `{name}`, or the
/// name itself when it has a `{`, so that they all share its hash slot.
pub fn prefix_of(lock: &str) -> String {
    if lock.contains('{') {
        lock.to_string()
    } else {
        format!("{{{lock}}}")
    }
}

/// The lock's message channel.
pub fn channel(lock: &str) -> String {
    channel_style("redisson_rwlock", lock)
}

/// `p:{name}`, or `p:name` when the name has a `{` (Redisson's
/// channel-style prefix, design.md §1).
fn channel_style(p: &str, lock: &str) -> String {
    format!("{p}:{}", prefix_of(lock))
}

/// The plain lock's message channel (§10.1).
pub fn lock_channel(lock: &str) -> String {
    channel_style("redisson_lock__channel", lock)
}

/// The fencing token's counter (§10.1), shared by both kinds of lock.
pub fn token_key(lock: &str) -> String {
    channel_style("redisson_lock_token", lock)
}

/// The timeout key of `owner`'s `n`th read hold on `lock`.
pub fn timeout_key(lock: &str, owner: &str, n: impl fmt::Display) -> String {
    format!("{}:{owner}:rwlock_timeout:{n}", prefix_of(lock))
}

/// The unlock latch of request `id` on `lock`.
pub fn latch_key(lock: &str, id: &str) -> String {
    format!("{}:{id}", channel_style("redisson_unlock_latch", lock))
}

/// The acquisition latch of request `id` on `name` (§14.7).
pub fn request_latch_key(name: &str, id: &str) -> String {
    format!(
        "{}:{id}",
        channel_style("redisson_lock_request_latch", name)
    )
}

/// How long a server may take to answer PING after it was started.
pub const START_TIMEOUT: Duration = Duration::from_secs(10);
/// Read/write timeout of connections returned by [`Server::conn`].
pub const IO_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a server may take to exit after SIGTERM before it gets SIGKILL.
pub const STOP_TIMEOUT: Duration = Duration::from_secs(5);
/// How long [`Collector::sync`] waits for its marker.
pub const SYNC_TIMEOUT: Duration = Duration::from_secs(5);

const LOG_FILE: &str = "redis.log";

/// The harness's own timeouts times `RWLOCK_TIMEOUT_SCALE` (default 1), for
/// servers that run slowly on purpose (`make valgrind`).
pub fn scaled(d: Duration) -> Duration {
    let k: u32 = std::env::var("RWLOCK_TIMEOUT_SCALE")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(1);
    d * k.max(1)
}
const START_ATTEMPTS: usize = 5;

/// A command running in a thread of its own: its reply and how long it took.
pub type Call = JoinHandle<(redis::RedisResult<redis::Value>, Duration)>;

/// One pub/sub message: (channel, payload).
pub type Event = (Vec<u8>, Vec<u8>);

// ---------------------------------------------------------------------------
// Paths
// ---------------------------------------------------------------------------

/// The workspace's root, where the module's crate is.
pub fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Path of the module under test: `$RWLOCK_MODULE`, else
/// `<workspace>/target/release/librwlock.so`. Panics when the file does not exist.
pub fn module_path() -> PathBuf {
    let path = match std::env::var_os("RWLOCK_MODULE") {
        Some(p) if !p.is_empty() => PathBuf::from(p),
        _ => workspace_root().join("target/release/librwlock.so"),
    };
    if !path.is_file() {
        panic!(
            "module not found at {}: build the module first: cargo build --release \
             (or point RWLOCK_MODULE at librwlock.so)",
            path.display()
        );
    }
    // redis-server resolves relative paths against its own cwd/--dir; make it absolute.
    fs::canonicalize(&path).expect("canonicalize module path")
}

/// The `redis-server` binary: `$RWLOCK_REDIS_SERVER`, else `redis-server`.
pub fn redis_server_bin() -> String {
    match std::env::var("RWLOCK_REDIS_SERVER") {
        Ok(s) if !s.is_empty() => s,
        _ => "redis-server".to_string(),
    }
}

/// A master's arguments for the replica and AOF tests: every write is in
/// its AOF before the reply, and a replica is synced at once.
pub const DURABLE_MASTER: [&str; 6] = [
    "--appendonly",
    "yes",
    "--appendfsync",
    "always",
    "--repl-diskless-sync-delay",
    "0",
];

/// Redisson's seed-era read-write lock scripts, the read-write lock's oracle.
pub const SEED_LUA: &str = "RWLOCK_REDISSON_LUA";
/// Redisson 4.7's scripts of the plain lock family (lock, fenced lock,
/// non-reentrant lock, unlock with latch, force unlock, renewal) and of the
/// fair lock.
pub const LOCK_LUA: &str = "RWLOCK_REDISSON_LOCK_LUA";

/// Where `tests/oracle/extract.py` (`make oracle`) writes each set of
/// Redisson's scripts under `target/redisson-lua/`: the `folder` of its set
/// in `tests/oracle/redisson.toml`.
fn oracle_folder(var: &str) -> &'static str {
    match var {
        SEED_LUA => "3.17.0",
        LOCK_LUA => "4.7.0",
        _ => panic!("{var} names no set of Redisson's scripts (tests/oracle/redisson.toml)"),
    }
}

/// Directory of Redisson's seed Lua scripts; see [`lua_dir_of`].
pub fn lua_dir() -> Option<PathBuf> {
    lua_dir_of(SEED_LUA)
}

/// The folder of Redisson's scripts that `var` ([`SEED_LUA`] or
/// [`LOCK_LUA`]) stands for: the variable's value when it is set (an
/// override), else the folder `make oracle` extracts them to from Redisson's
/// jars. None when that is not a directory.
pub fn lua_dir_of(var: &str) -> Option<PathBuf> {
    let dir = match std::env::var_os(var) {
        Some(v) if !v.is_empty() => PathBuf::from(v),
        _ => workspace_root()
            .join("target/redisson-lua")
            .join(oracle_folder(var)),
    };
    if dir.is_dir() {
        Some(dir)
    } else {
        None
    }
}

/// Fails the calling test, with how to get them, when Redisson's scripts
/// that `var` stands for are missing: the oracle is never skipped.
pub fn require_lua(var: &str) -> PathBuf {
    lua_dir_of(var).unwrap_or_else(|| {
        panic!(
            "Redisson's scripts for {var} are missing: run `make oracle` (tests/oracle/extract.py \
             reads them out of Redisson's jars from Maven Central into {}), or set {var} to a \
             folder of them",
            workspace_root()
                .join("target/redisson-lua")
                .join(oracle_folder(var))
                .display()
        )
    })
}

/// Text of `<lua_dir>/<name>.lua`. Panics when the directory is not configured
/// or the file cannot be read.
pub fn lua_script(name: &str) -> String {
    lua_script_of(SEED_LUA, name)
}

/// Text of `<$var>/<name>.lua` ([`SEED_LUA`] or [`LOCK_LUA`]). Panics when
/// the directory is not configured or the file cannot be read.
pub fn lua_script_of(var: &str, name: &str) -> String {
    let dir = require_lua(var);
    let path = dir.join(format!("{name}.lua"));
    fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("cannot read Lua script {}: {e}", path.display()))
}

/// `EVAL <lua_script(name)> numkeys keys... args...`, returning the raw reply.
pub fn eval_lua(
    conn: &mut Conn,
    name: &str,
    keys: &[&str],
    args: &[&str],
) -> redis::RedisResult<redis::Value> {
    eval_lua_of(conn, SEED_LUA, name, keys, args)
}

/// `EVAL <lua_script_of(var, name)> numkeys keys... args...`.
pub fn eval_lua_of(
    conn: &mut Conn,
    var: &str,
    name: &str,
    keys: &[&str],
    args: &[&str],
) -> redis::RedisResult<redis::Value> {
    let mut cmd = redis::cmd("EVAL");
    cmd.arg(lua_script_of(var, name))
        .arg(keys.len())
        .arg(keys)
        .arg(args);
    cmd.query(conn)
}

/// A name unique to this process and call, e.g. for lock names or owners.
pub fn unique(prefix: &str) -> String {
    format!("{prefix}-{}", uuid::Uuid::new_v4().simple())
}

/// `CONFIG SET notify-keyspace-events KEA`.
pub fn enable_keyspace_events(conn: &mut Conn) {
    let _: () = redis::cmd("CONFIG")
        .arg("SET")
        .arg("notify-keyspace-events")
        .arg("KEA")
        .query(conn)
        .expect("CONFIG SET notify-keyspace-events KEA");
}

// ---------------------------------------------------------------------------
// Server
// ---------------------------------------------------------------------------

static DIR_COUNTER: AtomicU64 = AtomicU64::new(0);

fn fresh_dir() -> PathBuf {
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos())
        .unwrap_or(0);
    let n = DIR_COUNTER.fetch_add(1, Ordering::SeqCst);
    let dir = std::env::temp_dir().join(format!(
        "rwlock-test-{}-{}-{}",
        std::process::id(),
        n,
        nanos
    ));
    fs::create_dir_all(&dir)
        .unwrap_or_else(|e| panic!("cannot create test dir {}: {e}", dir.display()));
    dir
}

/// A port on 127.0.0.1 that nothing listened on a moment ago.
pub fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1:0 to find a free port");
    listener
        .local_addr()
        .expect("local_addr of the port probe")
        .port()
    // listener dropped here: the port is free again (small race, handled by retries)
}

/// A free port P whose cluster bus port P + 10000 is free as well.
fn free_cluster_port() -> u16 {
    loop {
        let port = free_port();
        if port <= u16::MAX - 10_000 && TcpListener::bind(("127.0.0.1", port + 10_000)).is_ok() {
            return port;
        }
    }
}

/// Whether a process `pid` exists (`kill -0`).
pub fn pid_alive(pid: u32) -> bool {
    Command::new("kill")
        .arg("-0")
        .arg(pid.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .map(|s| s.success())
        .unwrap_or(false)
}

fn send_signal(pid: u32, sig: &str) {
    let _ = Command::new("kill")
        .arg(format!("-{sig}"))
        .arg(pid.to_string())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status();
}

/// Wait until the child exits, at most `timeout`. True when it exited.
fn wait_exit(child: &mut Child, timeout: Duration) -> bool {
    let deadline = Instant::now() + timeout;
    loop {
        match child.try_wait() {
            Ok(Some(_)) => return true,
            Ok(None) => {}
            Err(_) => return true,
        }
        if Instant::now() >= deadline {
            return false;
        }
        thread::sleep(Duration::from_millis(10));
    }
}

/// What runs the server: redis-server itself, or a wrapper that execs it.
struct Launch {
    program: String,
    envs: Vec<(String, String)>,
}

enum StartError {
    /// The port was taken (by someone else): try another one.
    PortInUse(String),
    /// Anything else: fatal, with the explanation.
    Fatal(String),
}

/// A `redis-server` child process bound to 127.0.0.1 on a free port, with its
/// own directory. Stopped (SIGTERM, then SIGKILL) and its directory removed on drop.
pub struct Server {
    pub port: u16,
    child: Child,
    dir: PathBuf,
    launch: Launch,
    /// Arguments after `--port P --bind 127.0.0.1 --dir D`.
    args: Vec<String>,
    running: bool,
}

impl Server {
    /// Start a server with the module loaded (no module arguments).
    pub fn start(extra_args: &[&str]) -> Server {
        Self::start_with_module_args(&[], extra_args)
    }

    /// Start a server with the module loaded (no module arguments), and
    /// connect to it.
    pub fn started(extra_args: &[&str]) -> (Server, Conn) {
        let server = Self::start(extra_args);
        let conn = server.conn();
        (server, conn)
    }

    /// Start a server with the module loaded, connect to it, and park a
    /// client behind a holder (see [`Server::park_behind`]).
    pub fn with_waiter(hold: &[&str], wait: &[&str]) -> (Server, Conn, Call) {
        Self::with_waiter_on(&[], hold, wait)
    }

    /// [`Server::with_waiter`] on a server started with `extra_args`.
    pub fn with_waiter_on(
        extra_args: &[&str],
        hold: &[&str],
        wait: &[&str],
    ) -> (Server, Conn, Call) {
        let (server, mut conn) = Self::started(extra_args);
        let waiter = server.park_behind(&mut conn, hold, wait);
        (server, conn, waiter)
    }

    /// Start a server with the module loaded as
    /// `--loadmodule <so> <module_args...>`, then `extra_args`.
    pub fn start_with_module_args(module_args: &[&str], extra_args: &[&str]) -> Server {
        let module = module_path();
        let mut args = vec![
            "--loadmodule".to_string(),
            module.to_string_lossy().into_owned(),
        ];
        args.extend(module_args.iter().map(|s| s.to_string()));
        args.extend(extra_args.iter().map(|s| s.to_string()));
        Self::start_args(args)
    }

    /// Start a server without the module (e.g. the Lua oracle of differential tests).
    pub fn start_plain(extra_args: &[&str]) -> Server {
        Self::start_args(extra_args.iter().map(|s| s.to_string()).collect())
    }

    /// Start a server through another program that ends up exec'ing
    /// redis-server with the arguments it is given (a wrapper script, such
    /// as the Docker image's entrypoint), with extra environment variables.
    pub fn start_via(program: &Path, envs: &[(&str, &str)], extra_args: &[&str]) -> Server {
        let launch = Launch {
            program: program.to_string_lossy().into_owned(),
            envs: envs
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
        };
        Self::start_launch(
            launch,
            extra_args.iter().map(|s| s.to_string()).collect(),
            free_port,
        )
    }

    /// Start a Redis Cluster node with the module loaded: like
    /// [`Server::start_with_module_args`], on a port whose cluster bus port
    /// (port + 10000) is free too. The caller passes `--cluster-enabled yes`.
    pub fn start_cluster_node(module_args: &[&str], extra_args: &[&str]) -> Server {
        let mut args = vec![
            "--loadmodule".to_string(),
            module_path().to_string_lossy().into_owned(),
        ];
        args.extend(module_args.iter().map(|s| s.to_string()));
        args.extend(extra_args.iter().map(|s| s.to_string()));
        let launch = Launch {
            program: redis_server_bin(),
            envs: Vec::new(),
        };
        Self::start_launch(launch, args, free_cluster_port)
    }

    fn start_args(user_args: Vec<String>) -> Server {
        let launch = Launch {
            program: redis_server_bin(),
            envs: Vec::new(),
        };
        Self::start_launch(launch, user_args, free_port)
    }

    fn start_launch(launch: Launch, user_args: Vec<String>, pick_port: fn() -> u16) -> Server {
        // Defaults first: later options win in redis-server, so the caller's
        // arguments override them.
        let mut args: Vec<String> = ["--save", "", "--appendonly", "no", "--daemonize", "no"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        args.extend(user_args);
        let dir = fresh_dir();
        let mut last = String::new();
        for _ in 0..START_ATTEMPTS {
            let port = pick_port();
            match Self::spawn_and_wait(&launch, port, &dir, &args) {
                Ok(child) => {
                    return Server {
                        port,
                        child,
                        dir,
                        launch,
                        args,
                        running: true,
                    }
                }
                Err(StartError::PortInUse(msg)) => last = msg,
                Err(StartError::Fatal(msg)) => {
                    let _ = fs::remove_dir_all(&dir);
                    panic!("{msg}");
                }
            }
        }
        let _ = fs::remove_dir_all(&dir);
        panic!("redis-server did not start after {START_ATTEMPTS} attempts; last: {last}");
    }

    fn command_line(port: u16, dir: &Path, args: &[String]) -> Vec<String> {
        let mut v = vec![
            "--port".to_string(),
            port.to_string(),
            "--bind".to_string(),
            "127.0.0.1".to_string(),
            "--dir".to_string(),
            dir.to_string_lossy().into_owned(),
        ];
        // --dir must come first for relative paths, but user args may still override
        // anything (including --dir) since they come later.
        v.extend(args.iter().cloned());
        v
    }

    fn spawn_and_wait(
        launch: &Launch,
        port: u16,
        dir: &Path,
        args: &[String],
    ) -> Result<Child, StartError> {
        let log_path = dir.join(LOG_FILE);
        let log = OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)
            .map_err(|e| StartError::Fatal(format!("open {}: {e}", log_path.display())))?;
        let log_err = log
            .try_clone()
            .map_err(|e| StartError::Fatal(format!("dup log file: {e}")))?;
        let bin = &launch.program;
        let argv = Self::command_line(port, dir, args);
        let mut child = Command::new(bin)
            .args(&argv)
            .envs(launch.envs.iter().map(|(k, v)| (k, v)))
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::from(log))
            .stderr(Stdio::from(log_err))
            .spawn()
            .map_err(|e| StartError::Fatal(format!("cannot run {bin}: {e}")))?;
        let pid = child.id();
        let deadline = Instant::now() + scaled(START_TIMEOUT);
        let url = format!("redis://127.0.0.1:{port}/");
        let client = redis::Client::open(url.as_str())
            .map_err(|e| StartError::Fatal(format!("bad url {url}: {e}")))?;
        loop {
            if let Ok(Some(status)) = child.try_wait() {
                let text = fs::read_to_string(&log_path).unwrap_or_default();
                let msg = format!(
                    "redis-server exited during startup ({status}); command: {bin} {}\n\
                     ---- log {} ----\n{text}",
                    shell_join(&argv),
                    log_path.display()
                );
                return Err(if text.contains("Address already in use") {
                    StartError::PortInUse(msg)
                } else {
                    StartError::Fatal(msg)
                });
            }
            if Instant::now() >= deadline {
                let _ = child.kill();
                let _ = wait_exit(&mut child, scaled(STOP_TIMEOUT));
                let text = fs::read_to_string(&log_path).unwrap_or_default();
                return Err(StartError::Fatal(format!(
                    "redis-server did not answer PING within {START_TIMEOUT:?}; command: \
                     {bin} {}\n---- log {} ----\n{text}",
                    shell_join(&argv),
                    log_path.display()
                )));
            }
            if let Some(server_pid) = ping_pid(&client) {
                if server_pid == pid {
                    return Ok(child);
                }
                // Another server answers on this port: ours will fail to bind.
                let _ = child.kill();
                let _ = wait_exit(&mut child, scaled(STOP_TIMEOUT));
                return Err(StartError::PortInUse(format!(
                    "port {port} is served by another process (pid {server_pid})"
                )));
            }
            thread::sleep(Duration::from_millis(20));
        }
    }

    /// Stop the process if running (SIGTERM, wait, SIGKILL) and start it again
    /// with the same arguments, port and directory. Data survives when the
    /// arguments enable persistence (e.g. `--appendonly yes`).
    pub fn restart(&mut self) {
        self.stop();
        let mut last = String::new();
        // The port was ours a moment ago; retry briefly in case the kernel lags.
        for _ in 0..START_ATTEMPTS {
            match Self::spawn_and_wait(&self.launch, self.port, &self.dir, &self.args) {
                Ok(child) => {
                    self.child = child;
                    self.running = true;
                    return;
                }
                Err(StartError::PortInUse(msg)) => {
                    last = msg;
                    thread::sleep(Duration::from_millis(200));
                }
                Err(StartError::Fatal(msg)) => panic!("restart failed: {msg}"),
            }
        }
        panic!(
            "restart failed: port {} stayed busy; last: {last}",
            self.port
        );
    }

    /// SIGKILL the server and reap it (simulates a crash; `restart` brings it back).
    pub fn kill9(&mut self) {
        if self.running {
            let _ = self.child.kill();
            let _ = self.child.wait();
            self.running = false;
        }
    }

    /// Graceful stop: SIGTERM, wait up to [`STOP_TIMEOUT`], then SIGKILL.
    pub fn stop(&mut self) {
        if !self.running {
            return;
        }
        send_signal(self.child.id(), "TERM");
        if !wait_exit(&mut self.child, scaled(STOP_TIMEOUT)) {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
        self.running = false;
    }

    /// Sends `sig` (`STOP`, `CONT`...) to the server's process: `STOP`
    /// freezes it (a replica that stops acknowledging) until `CONT`.
    pub fn signal(&self, sig: &str) {
        send_signal(self.child.id(), sig);
    }

    /// Starts a server with the module as a replica of this one, with
    /// `extra_args`, and waits (bounded) until it acknowledges what this one
    /// streams to it. (The replica reports its link up once it has loaded
    /// the master's data, but after a diskless sync the master streams
    /// commands to it only from its first acknowledgement, up to a second
    /// later: a `WAIT` meanwhile lasts that long.) The probe is a `PUBLISH`,
    /// which is replicated but writes no key.
    pub fn start_replica(&self, extra_args: &[&str]) -> Server {
        let port = self.port.to_string();
        let replicaof = ["--replicaof", "127.0.0.1", port.as_str()];
        let replica = Server::start(&[&replicaof[..], extra_args].concat());
        let mut master = self.conn();
        crate::wait_until(scaled(START_TIMEOUT), "the replica streamed to", || {
            crate::ok(&mut master, &["PUBLISH", "__rwlock_test_replica", "probe"]);
            let acked: i64 = crate::query(&mut master, &["WAIT", "1", "100"]);
            (acked == 1).then_some(())
        });
        replica
    }

    /// True while the child process has not exited.
    pub fn is_running(&mut self) -> bool {
        self.running && matches!(self.child.try_wait(), Ok(None))
    }

    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    pub fn url(&self) -> String {
        format!("redis://127.0.0.1:{}/", self.port)
    }

    /// `127.0.0.1:<port>`, what [`Conn::open`] takes.
    pub fn address(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Full arguments after `--port/--bind/--dir`.
    pub fn args(&self) -> &[String] {
        &self.args
    }

    /// A copy of the server's AOF (its `appendonlydir`), for another server
    /// to load with `--dir <copy>`. It lies inside this server's directory so
    /// that it is removed, or kept for a look, along with it.
    pub fn copy_aof(&self) -> PathBuf {
        let copy = self.dir.join(unique("aof-copy"));
        let aof_dir = copy.join("appendonlydir");
        fs::create_dir_all(&aof_dir).expect("create the AOF copy's directory");
        for entry in fs::read_dir(self.dir.join("appendonlydir")).expect("read appendonlydir") {
            let path = entry.expect("dir entry").path();
            let name = path.file_name().expect("file name");
            fs::copy(&path, aof_dir.join(name)).expect("copy AOF file");
        }
        copy
    }

    /// Contents of the server's stdout/stderr log (all runs, appended).
    pub fn log(&self) -> String {
        fs::read_to_string(self.dir.join(LOG_FILE)).unwrap_or_default()
    }

    pub fn client(&self) -> redis::Client {
        redis::Client::open(self.url().as_str()).expect("redis::Client::open")
    }

    /// Runs a command on a connection of its own in a thread (a waiter that
    /// blocks, say); the thread returns the reply and how long it took.
    pub fn spawn_call(&self, args: &[&str]) -> Call {
        let mut conn = self.conn();
        let args: Vec<String> = args.iter().map(|a| a.to_string()).collect();
        thread::spawn(move || {
            let start = Instant::now();
            let reply = crate::call(&mut conn, &args);
            (reply, start.elapsed())
        })
    }

    /// Runs `hold` on `conn` (it must succeed: it takes the lock), then
    /// `wait` with [`Server::spawn_call`], and returns once one client is
    /// parked in the module.
    pub fn park_behind(&self, conn: &mut Conn, hold: &[&str], wait: &[&str]) -> Call {
        crate::ok(conn, hold);
        let waiter = self.spawn_call(wait);
        crate::wait_for_waiters(conn, 1);
        waiter
    }

    /// A client in a process of its own (python3): it sends `command`
    /// (inline), prints the first `reply_len` bytes of the reply and
    /// sleeps with its socket open until killed, as a holder that crashes.
    /// Returns the process and that reply.
    pub fn client_process(&self, command: &str, reply_len: usize) -> (Child, Vec<u8>) {
        let script = format!(
            "import socket, sys, time\n\
             s = socket.create_connection(('127.0.0.1', {port}))\n\
             s.sendall(b'{command}\\r\\n')\n\
             sys.stdout.write(s.recv(64).decode()); sys.stdout.flush()\n\
             time.sleep(60)\n",
            port = self.port
        );
        let mut child = Command::new("python3")
            .args(["-c", &script])
            .stdout(Stdio::piped())
            .spawn()
            .expect("start python3");
        let mut reply = vec![0u8; reply_len];
        std::io::Read::read_exact(child.stdout.as_mut().expect("its stdout"), &mut reply)
            .expect("its reply");
        (child, reply)
    }

    /// Runs `wait` with [`Server::spawn_call`] and returns once it is
    /// parked in the module, behind the clients already waiting (`conn`,
    /// another client, watches `INFO rwlock`).
    pub fn park(&self, conn: &mut Conn, wait: &[&str]) -> Call {
        let before = crate::waiters(conn);
        let waiter = self.spawn_call(wait);
        crate::wait_for_waiters(conn, before + 1);
        waiter
    }

    /// Turns this server into a replica of `master` (through `conn`) and
    /// checks that every parked waiter fails at once with the replica's
    /// error: the module's READONLY, or the UNBLOCKED with which Redis 7.0
    /// unblocks module waiters itself when it turns replica. Returns their
    /// error codes.
    pub fn demote_failing_waiters(
        &self,
        conn: &mut Conn,
        master: &Server,
        parked: impl IntoIterator<Item = Call>,
    ) -> Vec<String> {
        crate::ok(conn, &["REPLICAOF", "127.0.0.1", &master.port.to_string()]);
        parked
            .into_iter()
            .map(|waiter| {
                let (reply, waited) = waiter.join().expect("the waiter's thread");
                let e = reply.expect_err("a waiter on a demoted master must fail");
                assert!(
                    matches!(e.code(), Some("READONLY" | "UNBLOCKED"))
                        && e.to_string().contains("replica"),
                    "{e}"
                );
                assert!(waited < Duration::from_secs(5), "told after {waited:?}");
                e.code().unwrap_or_default().to_string()
            })
            .collect()
    }

    /// Sends `wait` (a BLOCK acquisition that will park) on a connection of
    /// its own without reading the reply, kills that client once it is
    /// parked, and returns when the module has let go of it: a waiter that
    /// hung up. `conn` (another client) watches `INFO rwlock`.
    pub fn park_and_hang_up(&self, conn: &mut Conn, wait: &[&str]) {
        let before = crate::waiters(conn);
        let mut waiter = self.conn();
        let id: i64 = crate::query(&mut waiter, &["CLIENT", "ID"]);
        waiter
            .send_packed_command(&crate::cmd_of(wait).get_packed_command())
            .expect("send the waiting command");
        crate::wait_for_waiters(conn, before + 1);
        crate::expect_reply(
            conn,
            &["CLIENT", "KILL", "ID", &id.to_string()],
            redis::Value::Int(1),
        );
        drop(waiter);
        crate::wait_for_waiters(conn, before);
    }

    /// A new connection with [`IO_TIMEOUT`] connect/read/write timeouts.
    pub fn conn(&self) -> Conn {
        Conn::open(&self.address(), scaled(IO_TIMEOUT)).unwrap_or_else(|e| {
            panic!(
                "connect to {}: {e}\n---- log ----\n{}",
                self.url(),
                self.log()
            )
        })
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.stop();
        if thread::panicking() {
            let log = self.log();
            let lines: Vec<&str> = log.lines().collect();
            let tail = &lines[lines.len().saturating_sub(60)..];
            eprintln!(
                "---- redis-server log (port {}, last {} lines) ----\n{}",
                self.port,
                tail.len(),
                tail.join("\n")
            );
        }
        if std::env::var_os("RWLOCK_KEEP_TEST_DIRS").is_none() {
            let _ = fs::remove_dir_all(&self.dir);
        }
    }
}

/// PING the server and return its `process_id`, or None if it does not answer.
fn ping_pid(client: &redis::Client) -> Option<u32> {
    let conn = client
        .get_connection_with_timeout(Duration::from_millis(500))
        .ok()?;
    conn.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    conn.set_write_timeout(Some(Duration::from_secs(2))).ok()?;
    let mut conn = conn;
    let pong: String = redis::cmd("PING").query(&mut conn).ok()?;
    if pong != "PONG" {
        return None;
    }
    let info: String = redis::cmd("INFO").arg("server").query(&mut conn).ok()?;
    info.lines()
        .find_map(|l| l.strip_prefix("process_id:"))
        .and_then(|v| v.trim().parse().ok())
}

fn shell_join(args: &[String]) -> String {
    args.iter()
        .map(|a| {
            if a.is_empty() {
                "\"\"".to_string()
            } else if a.contains(char::is_whitespace) {
                format!("'{a}'")
            } else {
                a.clone()
            }
        })
        .collect::<Vec<_>>()
        .join(" ")
}

// ---------------------------------------------------------------------------
// Event collector
// ---------------------------------------------------------------------------

/// Collects pub/sub messages (keyspace notifications, lock channels, ...) on
/// its own connection in a background thread.
///
/// [`Collector::sync`] publishes a unique marker on a private channel and
/// returns everything received before it: since Redis delivers messages to one
/// subscriber in order, that is every message caused by commands that were
/// acknowledged before `sync` was called, with no sleeps.
pub struct Collector {
    events: Arc<Mutex<Vec<Event>>>,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    marker_channel: String,
    error: Arc<Mutex<Option<String>>>,
}

impl Collector {
    /// PSUBSCRIBE to `patterns` (e.g. `__keyspace@0__:*`, `__keyevent@0__:*`,
    /// `redisson_rwlock:*`). Returns once the subscriptions are active.
    pub fn start(server: &Server, patterns: &[&str]) -> Collector {
        let marker_channel = format!("__rwlock_test_marker:{}", uuid::Uuid::new_v4().simple());
        let events: Arc<Mutex<Vec<Event>>> = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let error: Arc<Mutex<Option<String>>> = Arc::new(Mutex::new(None));
        let conn = server.conn();
        let patterns: Vec<String> = patterns.iter().map(|s| s.to_string()).collect();
        let (ready_tx, ready_rx) = mpsc::channel::<Result<(), String>>();
        let thread = {
            let events = Arc::clone(&events);
            let stop = Arc::clone(&stop);
            let error = Arc::clone(&error);
            let marker_channel = marker_channel.clone();
            thread::Builder::new()
                .name("rwlock-test-collector".into())
                .spawn(move || {
                    collector_loop(
                        conn,
                        patterns,
                        marker_channel,
                        events,
                        stop,
                        error,
                        ready_tx,
                    )
                })
                .expect("spawn collector thread")
        };
        match ready_rx.recv_timeout(IO_TIMEOUT) {
            Ok(Ok(())) => {}
            Ok(Err(e)) => panic!("collector: subscribe failed: {e}"),
            Err(_) => panic!("collector: subscriptions not confirmed within {IO_TIMEOUT:?}"),
        }
        Collector {
            events,
            stop,
            thread: Some(thread),
            marker_channel,
            error,
        }
    }

    /// Publish a unique marker through `conn` and wait (at most [`SYNC_TIMEOUT`])
    /// until the collector receives it. Returns and removes every message that
    /// arrived before the marker; marker messages are never returned.
    pub fn sync(&self, conn: &mut Conn) -> Vec<Event> {
        let token = uuid::Uuid::new_v4().simple().to_string().into_bytes();
        let receivers: i64 = redis::cmd("PUBLISH")
            .arg(&self.marker_channel)
            .arg(&token)
            .query(conn)
            .expect("collector: PUBLISH marker");
        assert!(
            receivers >= 1,
            "collector: marker had no subscriber (collector thread gone? {:?})",
            self.error()
        );
        let marker = self.marker_channel.as_bytes();
        let deadline = Instant::now() + SYNC_TIMEOUT;
        loop {
            {
                let mut ev = self.events.lock().expect("collector mutex poisoned");
                if let Some(pos) = ev.iter().position(|(c, p)| c == marker && *p == token) {
                    let mut before: Vec<Event> = ev.drain(..=pos).collect();
                    before.retain(|(c, _)| c != marker);
                    return before;
                }
            }
            if Instant::now() >= deadline {
                panic!(
                    "collector: marker not received within {SYNC_TIMEOUT:?} (error: {:?})",
                    self.error()
                );
            }
            thread::sleep(Duration::from_millis(2));
        }
    }

    /// Wait (at most `timeout`) until a message satisfying `pred` has been
    /// collected; returns a copy of it without removing anything. For events
    /// that happen on their own, such as expirations.
    pub fn wait_for(
        &self,
        timeout: Duration,
        pred: impl Fn(&[u8], &[u8]) -> bool,
    ) -> Option<Event> {
        let deadline = Instant::now() + timeout;
        loop {
            {
                let ev = self.events.lock().expect("collector mutex poisoned");
                if let Some(e) = ev.iter().find(|(c, p)| pred(c, p)) {
                    return Some(e.clone());
                }
            }
            if Instant::now() >= deadline {
                return None;
            }
            thread::sleep(Duration::from_millis(5));
        }
    }

    /// Copy of everything collected so far (markers excluded), without clearing.
    pub fn snapshot(&self) -> Vec<Event> {
        let marker = self.marker_channel.as_bytes();
        self.events
            .lock()
            .expect("collector mutex poisoned")
            .iter()
            .filter(|(c, _)| c != marker)
            .cloned()
            .collect()
    }

    /// Remove and return everything collected so far (markers excluded),
    /// without synchronising.
    pub fn take(&self) -> Vec<Event> {
        let marker = self.marker_channel.as_bytes();
        let mut all = std::mem::take(&mut *self.events.lock().expect("collector mutex poisoned"));
        all.retain(|(c, _)| c != marker);
        all
    }

    /// The error that ended the background thread, if any.
    pub fn error(&self) -> Option<String> {
        self.error.lock().ok().and_then(|e| e.clone())
    }
}

impl Drop for Collector {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            // The thread polls `stop` at least every POLL_TIMEOUT; it also ends
            // when the server goes away. Don't hang a test on a stuck thread.
            let deadline = Instant::now() + Duration::from_secs(5);
            while !t.is_finished() && Instant::now() < deadline {
                thread::sleep(Duration::from_millis(5));
            }
            if t.is_finished() {
                let _ = t.join();
            }
        }
    }
}

const POLL_TIMEOUT: Duration = Duration::from_millis(100);

fn collector_loop(
    mut conn: Conn,
    patterns: Vec<String>,
    marker_channel: String,
    events: Arc<Mutex<Vec<Event>>>,
    stop: Arc<AtomicBool>,
    error: Arc<Mutex<Option<String>>>,
    ready: mpsc::Sender<Result<(), String>>,
) {
    let subscribed = (|| -> redis::RedisResult<()> {
        conn.subscribe(&marker_channel)?;
        for p in &patterns {
            conn.psubscribe(p)?;
        }
        conn.set_read_timeout(Some(POLL_TIMEOUT))?;
        Ok(())
    })();
    if let Err(e) = subscribed {
        let _ = ready.send(Err(e.to_string()));
        return;
    }
    let _ = ready.send(Ok(()));
    while !stop.load(Ordering::SeqCst) {
        match conn.next_message() {
            Ok(msg) => events
                .lock()
                .expect("collector mutex poisoned")
                .push((msg.channel, msg.payload)),
            Err(e) if e.is_timeout() => continue,
            Err(e) => {
                if let Ok(mut slot) = error.lock() {
                    *slot = Some(e.to_string());
                }
                break;
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Small helpers for assertions
// ---------------------------------------------------------------------------

/// Events as lossy UTF-8 strings, for readable assertions and messages.
pub fn events_str(events: &[Event]) -> Vec<(String, String)> {
    events
        .iter()
        .map(|(c, p)| {
            (
                String::from_utf8_lossy(c).into_owned(),
                String::from_utf8_lossy(p).into_owned(),
            )
        })
        .collect()
}

/// Only the events whose channel starts with `prefix`.
pub fn events_on(events: &[Event], prefix: &str) -> Vec<(String, String)> {
    events_str(events)
        .into_iter()
        .filter(|(c, _)| c.starts_with(prefix))
        .collect()
}

// ---------------------------------------------------------------------------
// Other programs
// ---------------------------------------------------------------------------

/// Runs a program to its end, bounded: it is killed, and the test fails,
/// past `limit`. Returns whether it succeeded, and its stdout and stderr
/// interleaved as written.
pub fn run_bounded(cmd: &mut Command, limit: Duration) -> (bool, String) {
    let dir = fresh_dir();
    let out_path = dir.join("output");
    let out = fs::File::create(&out_path).expect("output file");
    let mut child = cmd
        .stdin(Stdio::null())
        .stdout(out.try_clone().expect("dup the output file"))
        .stderr(out)
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    let deadline = Instant::now() + limit;
    let status = loop {
        if let Some(status) = child.try_wait().expect("try_wait") {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            let text = fs::read_to_string(&out_path).unwrap_or_default();
            let _ = fs::remove_dir_all(&dir);
            panic!("{cmd:?} still running after {limit:?}; output:\n{text}");
        }
        thread::sleep(Duration::from_millis(20));
    };
    let text = fs::read_to_string(&out_path).unwrap_or_default();
    let _ = fs::remove_dir_all(&dir);
    (status.success(), text)
}
