//! The benchmark suite (`make bench`, or `cargo bench --bench suite`): every
//! figure is measured against a baseline run in the same process on the same
//! server, so the ratios hold on a noisy machine. Prints tables, writes CSV
//! and Markdown under `target/bench` (or `$RWLOCK_BENCH_OUT`); `make bench`
//! then draws the chart.
//!
//! Arguments (after `--`): section names to run only those (cycles, readers,
//! fresh, handoff, contended, memory), `--quick` for short runs.

mod contended;
mod cycles;
mod fresh;
mod handoff;
mod load;
mod memory;
mod readers;
mod report;
mod resp;
mod scripts;
mod stats;

use std::path::PathBuf;

use report::{Report, Settings};
use scripts::Scripts;
use testkit::Server;

/// The servers' options beyond the harness's own: DEBUG HTSTATS tells the
/// memory and fresh sections when rehashing is over.
pub const SERVER_OPTIONS: &[&str] = &["--enable-debug-command", "yes"];

const SECTIONS: [&str; 6] = [
    "cycles",
    "readers",
    "fresh",
    "handoff",
    "contended",
    "memory",
];

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
    let chosen: Vec<&str> = SECTIONS
        .into_iter()
        .filter(|s| args.iter().any(|a| a == s))
        .collect();
    let run = |s: &str| chosen.is_empty() || chosen.contains(&s);
    let settings = Settings::new(quick);
    let machine = machine();
    println!("{machine}");

    let server = Server::start(SERVER_OPTIONS);
    let Some(scripts) = Scripts::load(server.port) else {
        eprintln!("RWLOCK_REDISSON_LUA must name the directory of Redisson's seed scripts");
        std::process::exit(2);
    };
    let mut report = Report::default();
    if run("cycles") {
        println!("\n== uncontended cycles, {} clients ==", cycles::CLIENTS);
        cycles::run(&server, &scripts, &settings, &mut report);
    }
    if run("readers") {
        println!("\n== read unlock among N readers (server time per unlock) ==");
        readers::run(server.port, &scripts, &settings, &mut report);
    }
    if run("fresh") {
        println!(
            "\n== fresh lock names among {} held locks (server time per operation) ==",
            fresh::HELD
        );
        fresh::run(server.port, &scripts, &settings, &mut report);
    }
    if run("handoff") {
        println!("\n== handoff latency, unlock -> waiter's reply ==");
        handoff::run(&server, &scripts, &settings, &mut report);
    }
    if run("contended") {
        println!(
            "\n== contended throughput, {} clients on one write lock ==",
            contended::CLIENTS
        );
        contended::run(&server, &settings, &mut report);
    }
    if run("memory") {
        println!("\n== memory (INFO used_memory deltas) ==");
        memory::run(server.port, &scripts, &settings, &mut report);
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
