//! The benchmark suite (`make bench`, or `cargo bench --bench suite`): every
//! figure is measured against a baseline run in the same process on the same
//! server, so the ratios hold on a noisy machine. Prints tables, writes CSV
//! and Markdown under `target/bench` (or `$RWLOCK_BENCH_OUT`); `make bench`
//! then draws the chart.
//!
//! Arguments (after `--`): section names to run only those (cycles, readers,
//! fresh, handoff, contended, memory for the read-write lock; lock-cycles,
//! lock-handoff, lock-contended, lock-memory for the plain lock, or `lock`
//! for all four; multilock for the multi-hold), `--quick` for short runs.

mod contended;
mod cycles;
mod fresh;
mod handoff;
mod kinds;
mod load;
mod memory;
mod multilock;
mod plain;
mod readers;
mod report;
mod resp;
mod scripts;
mod stats;

use std::path::PathBuf;

use kinds::{PLAIN, WRITE};
use report::{Report, Settings};
use scripts::Scripts;
use testkit::Server;

/// The servers' options beyond the harness's own: DEBUG HTSTATS tells the
/// memory and fresh sections when rehashing is over.
pub const SERVER_OPTIONS: &[&str] = &["--enable-debug-command", "yes"];

/// The argument that names every section of the plain lock (`lock-…`).
const PLAIN_LOCK: &str = "lock";

/// Every section: the argument that selects it, and its title.
const SECTIONS: [(&str, &str); 11] = [
    ("cycles", "uncontended cycles, 50 clients"),
    ("readers", "read unlock among N readers"),
    ("fresh", "fresh names among 200,000 held locks"),
    ("handoff", "handoff latency, unlock -> reply"),
    ("contended", "50 clients on one write lock"),
    ("memory", "memory, INFO used_memory deltas"),
    ("lock-cycles", "plain lock: uncontended cycles"),
    ("lock-handoff", "plain lock: handoff latency"),
    ("lock-contended", "plain lock: 50 clients on one lock"),
    ("lock-memory", "plain lock: memory"),
    ("multilock", "multi-lock: 32 clients, random 2-4 of 8 locks"),
];

// The titles name these.
const _: () = assert!(
    cycles::CLIENTS == 50
        && contended::CLIENTS == 50
        && fresh::HELD == 200_000
        && multilock::CLIENTS == 32
);

fn run_section(
    name: &str,
    (server, scripts, settings): (&Server, &Scripts, &Settings),
    report: &mut Report,
) {
    let (port, on) = (server.port, (server, scripts, settings));
    match name {
        "cycles" => cycles::run(server, scripts, settings, report),
        "readers" => readers::run(port, scripts, settings, report),
        "fresh" => fresh::run(port, scripts, settings, report),
        "handoff" => handoff::run(server, scripts, settings, report),
        "contended" => contended::run(on, (name, &WRITE, contended::WRITE_WAYS), report),
        "memory" => memory::run(port, scripts, settings, (name, memory::RWLOCK), report),
        "lock-cycles" => plain::run(server, scripts.plain(), settings, report),
        "lock-handoff" => handoff::run_plain(server, scripts, settings, report),
        "lock-contended" => contended::run(on, (name, &PLAIN, contended::PLAIN_WAYS), report),
        "lock-memory" => memory::run(port, scripts, settings, (name, memory::PLAIN), report),
        "multilock" => multilock::run(server, settings, report),
        other => unreachable!("no section {other}"),
    }
}

fn machine() -> String {
    let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
    let model = cpuinfo
        .lines()
        .find_map(|l| l.strip_prefix("model name"))
        .and_then(|l| l.split(':').nth(1))
        .map_or("unknown CPU".to_string(), |m| m.trim().to_string());
    let cores = std::thread::available_parallelism().map_or(0, |n| n.get());
    let version = std::process::Command::new(testkit::redis_server_bin())
        .arg("--version")
        .output()
        .map(|o| String::from_utf8_lossy(&o.stdout).trim().to_string())
        .unwrap_or_default();
    format!("Machine: {model}, {cores} cores; {version}")
}

fn main() {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let quick = args.iter().any(|a| a == "--quick");
    let settings = Settings::new(quick);
    let machine = machine();
    println!("{machine}");

    let server = Server::start(SERVER_OPTIONS);
    let Some(scripts) = Scripts::load(server.port) else {
        eprintln!("no Redisson scripts: run `make oracle` (or set RWLOCK_REDISSON_LUA)");
        std::process::exit(2);
    };
    let named = |name: &str| {
        let plain = name
            .strip_prefix(PLAIN_LOCK)
            .is_some_and(|rest| rest.starts_with('-'));
        args.iter().any(|a| a == name || (plain && a == PLAIN_LOCK))
    };
    // No section named: all of them.
    let any_named = SECTIONS.iter().any(|(name, _)| named(name));
    let mut report = Report::default();
    for (name, title) in SECTIONS {
        if named(name) || !any_named {
            println!("\n== {title} ==");
            run_section(name, (&server, &scripts, &settings), &mut report);
        }
    }
    let out = std::env::var_os("RWLOCK_BENCH_OUT")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("target/bench"));
    let dir = report.write(&out, &machine);
    println!(
        "\nwritten: {}/results.csv, ratios.csv, results.md",
        dir.display()
    );
    let (table, missed) = report.summary();
    println!("\n== summary: every target ==\n{table}");
    if missed.is_empty() {
        println!("every target met");
    } else {
        println!("targets NOT met:");
        for m in missed {
            println!("  {m}");
        }
    }
}
