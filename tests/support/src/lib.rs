//! What rwlock's integration tests (`tests/*.rs`) and benches share, as one
//! crate both take as a dev-dependency: redis-server processes with the
//! module (`Server`), their connections (`Conn`), pub/sub collection (`Collector`), Redisson's key names
//! and seed scripts, and the fault tests' kit (a seeded generator, key
//! snapshots, raw calls, INFO and config readers, bounded waits), the kill -9
//! tests' crash rounds (`testkit::crash_round`), and the
//! differential tests' two servers and runner (`testkit::differential`).
//!
//! Environment:
//! - `RWLOCK_MODULE`: path of `librwlock.so` (default `target/release/librwlock.so`).
//! - `RWLOCK_REDIS_SERVER`: the `redis-server` binary (default `redis-server` on PATH).
//! - `RWLOCK_REDISSON_LUA`: directory holding Redisson's seed-era read-write lock
//!   scripts (oracle); default `target/redisson-lua/3.17.0`, which `make oracle`
//!   extracts from Redisson's jar (tests/oracle/).
//! - `RWLOCK_REDISSON_LOCK_LUA`: directory holding Redisson 4.7's plain and fair lock
//!   scripts (oracle); default `target/redisson-lua/4.7.0`, likewise.
//! - `RWLOCK_KEEP_TEST_DIRS`: when set, server directories are not removed on drop.

mod conn;
mod crash;
pub mod differential;
mod harness;
mod kit;

pub use conn::{Conn, Message};
pub use crash::*;
pub use harness::*;
pub use kit::*;
