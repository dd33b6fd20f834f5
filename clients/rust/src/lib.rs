//! Redisson's locks for Rust, on the rwlock Redis module (`RWLOCK.*`,
//! `LOCK.*`, `SEMAPHORE.*`, `PERMIT.*`, `LATCH.*`; the repository's
//! README): the read-write lock (`RReadWriteLock`), the plain lock
//! (`RLock`), fenced (`RFencedLock`, returning the fencing token) or
//! non-reentrant, the multi-lock (taken by the server in one atomic
//! command), RedLock over several independent masters, the semaphore
//! (`RSemaphore`), the permit-expirable semaphore
//! (`RPermitExpirableSemaphore`) and the count-down latch
//! (`RCountDownLatch`); blocking ([`Client`]) and async on tokio
//! ([`aio::Client`]), on the [`redis`] crate.
//!
//! # Quick start
//!
//! ```no_run
//! use std::time::Duration;
//! use rwlock_client::Client;
//!
//! # fn main() -> Result<(), rwlock_client::Error> {
//! let locks = Client::new(redis::Client::open("redis://127.0.0.1:6399/")?);
//!
//! let orders = locks.read_write_lock("orders");
//! {
//!     let _held = orders.write()?; // waits on the server until free
//!     // no other reader or writer, in this process or any other
//! } // released here
//!
//! let invoice = locks.fenced_lock("invoice:42");
//! let held = invoice.try_acquire(Duration::from_secs(5))?;
//! let token = held.token(); // send it with every write; the storage
//!                           // refuses tokens lower than the last it saw
//! # let _ = token;
//! # Ok(())
//! # }
//! ```
//!
//! The same with tokio:
//!
//! ```no_run
//! # async fn run() -> Result<(), rwlock_client::Error> {
//! let locks = rwlock_client::aio::Client::new(
//!     redis::Client::open("redis://127.0.0.1:6399/")?,
//! );
//! let held = locks.lock("report").acquire().await?;
//! // ...
//! held.release().await?;
//! # Ok(())
//! # }
//! ```
//!
//! # How the holds behave
//!
//! - **Owners** are Redisson's `<client UUID>:<thread id>` ([`Client`] has
//!   one UUID; an async handle has a number of its own, see
//!   [`aio`]), so a thread re-enters its holds and Java services
//!   on Redisson sharing a lock see an ordinary holder.
//! - **Guards** release on drop. Without a lease ([`Options::lease`]) a
//!   **watchdog** (a thread, or a tokio task) renews the hold every third
//!   of [`Options::watchdog_timeout`] (30 s) and stops when a renewal says
//!   the hold is gone ([`Guard::is_lost`]), as Redisson's does. With a
//!   lease, the hold ends with it. With a **session**
//!   ([`Lock::with_session`]) the server keeps the hold while the guard's
//!   connection is open and releases it when it closes: no watchdog.
//! - **Waiting** is done by the server (`BLOCK`), never by polling, on a
//!   connection to the acquisition alone while it runs, whose timeout
//!   covers the wait, so a wait longer than [`Options::response_timeout`]
//!   works.
//! - **Connections** are reused, so a cycle opens none: the blocking
//!   client's calls borrow an idle connection of the client's and give it
//!   back once their replies came; the async client's calls that never
//!   wait on the server share one multiplexed connection per server, and a
//!   wait first tries there once (see [`aio`]). One that failed, timed out
//!   or was cancelled is closed. A session's hold keeps its own; a
//!   multi-lock, whose commands cannot be sent again after a stale
//!   connection failed them, takes a new one.
//! - **Replicas**: each acquisition pipelines, on its connection, `WAIT`
//!   for the replicas expected of its master (and, where the master writes
//!   an AOF, `WAITAOF 1 0`) and, when they did not acknowledge it within
//!   [`SyncOptions::timeout`] (1 s), releases it and returns
//!   [`Error::NotSynced`], as Redisson does by default
//!   (`checkLockSyncedSlaves`). The replicas expected are the most the
//!   master was ever seen with ([`Replicas::Auto`], learned from its `INFO`;
//!   never lowered by what it says later) or a count given.
//! - **Fair lock**: [`Client::fair_lock`] (Redisson's `RFairLock`,
//!   `FAIRLOCK.*`) grants holds in arrival order, waiting in the line on
//!   the server.
//! - **Lost replies**: the client object counts each owner's holds of each
//!   lock (as the server's hash does), and a single lock's acquisition and
//!   release say the count they found (`HELD n`). A lost reply is sent
//!   again once, the same, on a new connection: the server tells the resend
//!   of a call that ran from the hash (a grant answered granted, taking
//!   nothing more; a re-entered hold's release answered released, freeing
//!   no second level) and writes nothing else, so a cycle is one
//!   acquisition and one release. A last release's resend that finds
//!   nothing held is [`Error::ReleaseUnknown`] (it freed the lock, or the
//!   hold was gone before it). An owner's acquisitions and releases of one
//!   lock take turns in the client (the count they send must be the
//!   server's); an owner is one client object's. A session's acquisition
//!   carries no count (its resend re-enters); the semaphores carry request
//!   ids (`REQUEST id ttl`).
//! - **Multi-lock**: [`Client::multi_lock`] takes plain locks and read or
//!   write holds all at once, or none (`LOCK.ACQUIREALL`).
//! - **Semaphore**: [`Client::semaphore`] (Redisson's `RSemaphore`,
//!   `SEMAPHORE.*`): permits taken n at a time in arrival order, a
//!   [`Permits`] guard giving them back on drop; acquisitions and releases
//!   carry request ids (`REQUEST id ttl`) and are checked against the
//!   replicas as a lock's.
//! - **Permit-expirable semaphore**: [`Client::permit_expirable_semaphore`]
//!   (Redisson's `RPermitExpirableSemaphore`, `PERMIT.*`): permits taken
//!   as ids, each with its own lease (renewed by the watchdog when taken
//!   without one, or never expiring), a [`LeasedPermits`] guard releasing
//!   them on drop; an expired permit serves a waiter when it expires.
//! - **Count-down latch**: [`Client::count_down_latch`] (Redisson's
//!   `RCountDownLatch`, `LATCH.*`): a wait for zero waits on the server.
//! - **RedLock**: [`RedLock`] over independent masters; read its
//!   documentation for why Redisson deprecated it and why fencing tokens
//!   are the safer answer.
//!
//! # Servers
//!
//! A [`Client`] made with [`Client::new`] talks to one server: a standalone
//! master or the master of a replicated set. One made with
//! [`Client::sentinel`] follows the master that Redis Sentinel names
//! ([`Sentinels`]: their addresses, the master's name, an optional map of
//! the announced addresses): it asks the Sentinels when made and again
//! after a call fails as a call to a master that moved does (its
//! connection lost, `READONLY`, [`Error::NotSynced`]), and moves its
//! calls, renewals and releases to the master they name, keeping what it
//! learned of the replicas (the deployment's: a promoted replica is
//! expected to have as many as the master before it). One made with
//! [`Client::cluster`] takes each lock on
//! the master of its hash slot in a Redis Cluster, found from a seed node
//! by following the cluster's redirections (`MOVED`, `ASK`), and checks
//! that master's replicas; a multi-lock's names must share a hash tag. A
//! slot that migrates while held makes the watchdog report the hold lost.
//!
//! # Errors
//!
//! Every operation returns [`Error`], whose kinds are the client contract's
//! (`clients/contract`, the same names in every client of this
//! repository): [`Error::NotAcquired`] with the PTTL of the hold in the way
//! when a lock is taken (and stays so for the wait), [`Error::NotHeld`] when
//! a release finds nothing of the owner's, [`Error::ReleaseUnknown`] when
//! a last release's reply was lost and its resend found nothing held,
//! [`Error::NotReentrant`] when a
//! non-reentrant lock's holder asks again, [`Error::NotSynced`]; the
//! server's or the connection's errors as [`Error::Redis`].

// The files form one-way layers (tests/layering.rs checks it), each using
// only files before it:
//   error, owner → command → sentinel → options, cluster, pool →
//   connection → sync, watchdog
//   → handle (what both clients share) → builders (the methods both
//   clients' types share, as macros) → guard (the blocking acquisition
//   and its guard) → lock, rwlock, multi, semaphore, permit, latch →
//   client;
//   redlock → aio::redlock → aio (on handle, sync and
//   watchdog too).
pub mod aio;
mod builders;
mod client;
mod cluster;
mod command;
mod connection;
mod error;
mod guard;
mod handle;
mod latch;
mod lock;
mod multi;
mod options;
mod owner;
mod permit;
mod pool;
mod redlock;
mod rwlock;
mod semaphore;
mod sentinel;
mod sync;
mod watchdog;

pub use client::Client;
pub use command::Kind;
pub use error::{Error, Result};
pub use guard::Guard;
pub use latch::CountDownLatch;
pub use lock::Lock;
pub use multi::MultiLock;
pub use options::{Aof, Options, Replicas, SyncOptions};
pub use permit::{LeasedPermits, PermitExpirableSemaphore};
pub use redlock::{RedLock, RedLockGuard, DEFAULT_LEASE};
pub use rwlock::ReadWriteLock;
pub use semaphore::{Permits, Semaphore};
pub use sentinel::Sentinels;
pub use watchdog::LostHold;
