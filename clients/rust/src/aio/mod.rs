//! The async client, on tokio: the same locks as the blocking one, whose
//! acquisitions are futures, whose watchdog is a tokio task, and whose
//! guards release on drop by spawning the release on the runtime (or, to
//! see its outcome, with [`Guard::release`]).
//!
//! Its calls that never wait on the server (a try, a release, a check)
//! share one multiplexed connection per server, which the `redis` crate
//! pipelines across tasks. A wait (`acquire`, `try_acquire` with a wait)
//! first tries there once; only a lock found taken parks a connection of
//! its own (idle ones are reused), as does every wait of a fair lock or a
//! session, every wait for a lock another wait of the same client is
//! parked for (it is taken), and every acquisition on a master where
//! `WAIT` or `WAITAOF` follows it (either would stall the shared
//! connection). Dropping a waiting future closes its connection: the
//! server drops the waiter.
//!
//! An async task moves between threads, so an async lock's owner is not
//! the thread's: each handle ([`Client::lock`] and the like) gets its own,
//! `<client id>:<number>`, shared by its clones. The holds of one handle
//! re-enter each other; two handles of the same name are two owners. Its
//! clones' acquisitions and releases of one lock take turns (each says the
//! owner's count, `HELD n`), guards dropped together included: a wait of
//! one clone's holds up a release of the same hold by another until it
//! ends.

mod redlock;

pub use redlock::{RedLock, RedLockGuard};

use std::time::{Duration, Instant};

use redis::aio::MultiplexedConnection;
use redis::{AsyncConnectionConfig, Value};

use crate::builders::{
    client_builders, guard_calls, hold_calls, latch_calls, lock_builders, multi_builders,
    permit_calls, semaphore_calls,
};
use crate::cluster::{Endpoint, Route};
use crate::command::{acquire_error, is_io, Kind, Target, Wait};
use crate::error::{Error, Result};
use crate::handle::{self, exists, first, hold_keys, single, Granted, Hold, Release, Sent};
use crate::owner;
use crate::pool::Pools;
use crate::sentinel::{self, Followed, Sentinels};
use crate::sync;
use crate::watchdog::AsyncWatchdog;

/// The async locks of one client: a client id and the options, as
/// [`crate::Client`].
#[derive(Clone)]
pub struct Client(handle::Client);

impl Client {
    client_builders!(Client);

    /// A client of the master of the deployment `sentinels` watch, as
    /// [`crate::Client::sentinel`]: the Sentinels are asked for it now, and
    /// again after a call fails as one to a master that moved does.
    pub async fn sentinel(sentinels: Sentinels) -> Result<Client> {
        let master = sentinel::find(&sentinels).await?;
        Ok(Client(handle::Client::new(Endpoint::sentinel(
            sentinels, master,
        ))))
    }

    /// A handle with an owner of its own.
    fn handle(&self, target: Target) -> Handle {
        let owner = owner::owner(self.0.client_id(), owner::fresh_id());
        self.0.handle(target, owner)
    }
}

/// An async lock handle, whose owner is its own.
type Handle = handle::Handle<String>;

/// A connection made within `connect_timeout` whose calls never time out
/// (each call gets its own: [`Borrowed::timed`]).
async fn connect(
    client: &redis::Client,
    connect_timeout: Option<Duration>,
) -> Result<MultiplexedConnection> {
    let config = AsyncConnectionConfig::new()
        .set_response_timeout(None)
        .set_connection_timeout(connect_timeout);
    Ok(client
        .get_multiplexed_async_connection_with_config(&config)
        .await?)
}

/// Which connection a call is sent on.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Via {
    /// The client's shared connection to the server: a call that never
    /// waits on the server (no `BLOCK`, `WAIT` or `WAITAOF`: one would
    /// stall every other call on it), pipelined with other tasks' calls.
    Shared,
    /// A connection to itself while it runs (a `BLOCK` parks only its
    /// caller), an idle one of the pool's when there is one.
    Idle,
    /// A new connection to itself: a call that cannot be sent again after
    /// a lost reply (an idle connection the server closed meanwhile would
    /// fail it), or the resend of one whose reply was lost.
    New,
}

/// The connection a call is sent on.
struct Borrowed {
    conn: MultiplexedConnection,
    shared: bool,
}

/// A connection to `client`'s server for a call sent `via` it, made within
/// `connect_timeout` when there is none to reuse.
async fn borrow(
    pools: &Pools,
    client: &redis::Client,
    via: Via,
    connect_timeout: Option<Duration>,
) -> Result<Borrowed> {
    let idle = match via {
        Via::Shared => {
            if let Some(conn) = pools.shared.get(client) {
                return Ok(Borrowed { conn, shared: true });
            }
            let conn = connect(client, connect_timeout).await?;
            // Tasks racing here each make one: the last set is kept, the
            // others close once their calls are done.
            pools.shared.set(client, conn.clone());
            return Ok(Borrowed { conn, shared: true });
        }
        Via::Idle => pools.multiplexed.take(client),
        Via::New => None,
    };
    let conn = match idle {
        Some(conn) => conn,
        None => connect(client, connect_timeout).await?,
    };
    Ok(Borrowed {
        conn,
        shared: false,
    })
}

impl Borrowed {
    /// The connection for a call whose replies are awaited at most
    /// `timeout` (None: no limit): a clone of its own (the timeout is per
    /// clone), so that the connection is shared or given back without it.
    fn timed(&self, timeout: Option<Duration>) -> MultiplexedConnection {
        let mut timed = self.conn.clone();
        if let Some(t) = timeout {
            timed.set_response_timeout(t);
        }
        timed
    }

    /// Its call's replies all came: a connection of its own goes back to
    /// the pool (the shared one stays shared).
    fn give_back(self, pools: &Pools, client: &redis::Client) {
        if !self.shared {
            pools.multiplexed.give_back(client, self.conn);
        }
    }
}

/// Asks `followed`'s Sentinels where the master is, when a call failed
/// since they were last asked; the connections to a master that moved are
/// closed.
async fn follow(followed: Option<&Followed>, pools: &Pools) {
    if let Some(followed) = followed {
        if let Some(before) = followed.refresh().await {
            pools.forget_multiplexed(&before);
        }
    }
}

impl Handle {
    /// Followed through Sentinel, asks where the master is when a call
    /// failed since (see [`follow`]).
    async fn follow(&self) {
        follow(self.endpoint.followed(), &self.pools).await;
    }

    /// A call's `outcome`: when it failed as one to a master that moved
    /// does, a followed deployment's Sentinels are asked before the next.
    fn settled<T>(&self, outcome: Result<T>) -> Result<T> {
        if let Err(e) = &outcome {
            self.endpoint.failed(e);
        }
        outcome
    }

    /// The connection to `name`'s server failed with `e`: the connections
    /// to it are closed, and a followed deployment's Sentinels asked where
    /// the master is before the call is sent again.
    async fn lost(&self, name: &str, e: redis::RedisError) {
        self.pools.forget_multiplexed(&self.endpoint.node(name));
        self.endpoint.failed(&e.into());
        self.follow().await;
    }

    async fn acquire(&self, target: &Target, wait: Wait) -> Result<Guard> {
        self.follow().await;
        let outcome = self.take(target, wait).await;
        self.settled(outcome)
    }

    async fn take(&self, target: &Target, wait: Wait) -> Result<Guard> {
        if wait == Wait::No {
            return self.attempt(target, wait).await;
        }
        let started = Instant::now();
        if self.tries_first(target) {
            match self.attempt(target, Wait::No).await {
                Err(Error::NotAcquired { .. }) => {}
                other => return other,
            }
        }
        // Counted while it may wait, so that this client's next
        // acquisitions of the lock skip the try (`tries_first`).
        let _waiting = self.holds.waiting(target.name());
        self.attempt(target, wait.left(started.elapsed())).await
    }

    /// True when a wait for `target` begins with one attempt on the shared
    /// connection: a free lock (the common case) then costs no connection
    /// to itself, and only a lock found taken parks one. A single lock's
    /// (one that can be sent again) outside a session (whose hold is bound
    /// to its connection), not fair (a try does not join the line: the
    /// wait would join it a round trip later), on a master where an
    /// acquisition waits for nothing else (replicas, the AOF); and not
    /// while another acquisition of this client waits for the lock on the
    /// server (it is taken: the try would be refused, a round trip spent).
    fn tries_first(&self, target: &Target) -> bool {
        if !target.resendable()
            || target.fair
            || self.options.session
            || self.holds.has_waiters(target.name())
        {
            return false;
        }
        let master = self
            .endpoint
            .learned_key(&self.endpoint.node(target.name()));
        self.masters
            .peek(&master, &self.options.sync)
            .is_some_and(|plan| plan.extra().is_zero())
    }

    /// One acquisition of `target`, waiting on the server as `wait` says.
    async fn attempt(&self, target: &Target, wait: Wait) -> Result<Guard> {
        let options = &self.options;
        let turn = self.holds.turn(hold_keys(target, &self.owner)).await;
        let mut acquisition = self.acquisition(target, wait, self.owner.clone(), turn)?;
        let name = acquisition.name;
        let via = if !acquisition.resendable() {
            Via::New
        } else if wait == Wait::No && !options.session {
            Via::Shared
        } else {
            Via::Idle
        };
        let sent = match self.send(name, &acquisition.cmd, None, wait, via).await {
            Err(Error::Redis(e)) if is_io(&e) && acquisition.resendable() => {
                // The reply was lost: once more, on a new connection, as
                // the blocking client (followed through Sentinel, on the
                // master named now); the other connections to that server
                // are suspect too.
                self.lost(name, e).await;
                let cmd = acquisition.resend().clone();
                let touch = acquisition.touch();
                self.send(name, &cmd, touch.as_ref(), acquisition.wait, Via::New)
                    .await
            }
            other => other,
        };
        let pools = self.pools.clone();
        let give_back = |client: &redis::Client, conn: Borrowed| conn.give_back(&pools, client);
        let granted = self.granted(target, acquisition, sent.map_err(acquire_error)?, give_back)?;
        Guard::start(granted, pools, self.watched(target)).await
    }

    /// The acquisition in one round trip on a connection `via` (the shared
    /// one only where the master's plan waits for nothing) whose response
    /// timeout covers the wait on the server and the sync's, as the
    /// blocking client's.
    async fn send(
        &self,
        name: &str,
        cmd: &redis::Cmd,
        touch: Option<&redis::Cmd>,
        wait: Wait,
        via: Via,
    ) -> Result<Sent<Borrowed>> {
        let response_timeout = self.options.response_timeout;
        let mut route = Route::start(&self.endpoint, name);
        loop {
            let master = self.endpoint.learned_key(&route.client);
            let plan = self.plan(&master);
            let waits = !plan.as_ref().is_some_and(|p| p.extra().is_zero());
            let via = if via == Via::Shared && waits {
                Via::Idle
            } else {
                via
            };
            let conn = borrow(&self.pools, &route.client, via, response_timeout).await?;
            let plan = match plan {
                Some(plan) => plan,
                None => {
                    let asked = Instant::now();
                    let mut asking = conn.timed(response_timeout);
                    let info: String = sync::info().query_async(&mut asking).await?;
                    self.learned(&master, &info, asked)
                }
            };
            let mut call = conn.timed(sync::timeout(wait.timeout(response_timeout), plan.extra()));
            let trip = self.trip(&route, name, cmd, touch, plan);
            let replies = trip.pipe.query_async(&mut call).await?;
            let mut answered = trip.split(replies)?;
            if let Some(checks) = answered.checks() {
                answered.after = checks.query_async(&mut call).await?;
            }
            match answered.refusal()? {
                None => return Ok(Sent { conn, answered }),
                Some(e) => {
                    // Answered: the connection serves another call.
                    conn.give_back(&self.pools, &route.client);
                    route.follow(&self.endpoint, name, e)?;
                }
            }
        }
    }

    /// True when this handle's owner holds every hold of `target`, as the
    /// server says.
    async fn is_held(&self, target: &Target) -> Result<bool> {
        target.check()?;
        self.follow().await;
        let outcome = self.held(target).await;
        self.settled(outcome)
    }

    async fn held(&self, target: &Target) -> Result<bool> {
        for (name, cmd) in target.held(&self.owner) {
            // A read: asked again on a new connection when the shared one
            // failed (the server closed it meanwhile).
            if !exists(
                self.resent(&name, Wait::No, true, |_| single(&cmd))
                    .await?
                    .0,
            )? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The reply of `cmd`, a command on the handle's name that takes no
    /// request id, as the blocking client's `call`: on the shared
    /// connection when it can be sent again (`resendable`), then once more
    /// on a new one when its reply was lost; else on a new one.
    async fn call(&self, cmd: &redis::Cmd, resendable: bool) -> Result<Value> {
        self.wait_call(|_| cmd.clone(), Wait::No, resendable).await
    }

    /// The reply of the command `cmd` makes for a wait on the server, as
    /// the blocking client's `wait_call`: a wait parks a connection of its
    /// own, whose response timeout covers it.
    async fn wait_call(
        &self,
        cmd: impl Fn(Wait) -> redis::Cmd,
        wait: Wait,
        resendable: bool,
    ) -> Result<Value> {
        self.target.check()?;
        self.follow().await;
        let outcome = self
            .resent(self.name(), wait, resendable, |w| single(&cmd(w)))
            .await;
        self.settled(outcome.and_then(|(replies, _)| first(replies)))
    }

    /// Releases one hold of `target` of this handle's owner without its
    /// guard, as a guard's release does.
    async fn unlock(&self, target: &Target) -> Result<()> {
        target.check()?;
        self.follow().await;
        let outcome = self.release(target).await;
        self.settled(outcome)
    }

    async fn release(&self, target: &Target) -> Result<()> {
        let hold = self.unguarded(target, self.owner.clone());
        let turn = self.holds.turn(hold.keys()).await;
        let release = hold.release(&turn);
        let sent = self
            .resent(target.name(), Wait::No, release.resendable, |_| {
                release.pipe.clone()
            })
            .await;
        hold.settled(&turn, &release, sent)
    }

    /// Sends the pipeline `pipe` makes for `wait` about the lock `name` as
    /// `routed` does: when it can be sent again (`resendable`) on the
    /// shared connection (a wait: an idle one of its own), and then once
    /// more on a new one when its reply was lost, waiting for what is left
    /// of `wait`; else on a new one: the replies, and whether they are the
    /// resend's.
    async fn resent(
        &self,
        name: &str,
        wait: Wait,
        resendable: bool,
        pipe: impl Fn(Wait) -> redis::Pipeline,
    ) -> Result<(Vec<Value>, bool)> {
        let via = match (resendable, wait) {
            (false, _) => Via::New,
            (true, Wait::No) => Via::Shared,
            (true, _) => Via::Idle,
        };
        let started = Instant::now();
        match self.routed(name, &pipe(wait), via, wait).await {
            Err(Error::Redis(e)) if is_io(&e) && resendable => {
                self.lost(name, e).await;
                let left = wait.left(started.elapsed());
                Ok((self.routed(name, &pipe(left), Via::New, left).await?, true))
            }
            other => Ok((other?, false)),
        }
    }

    /// Sends `pipe` about the lock `name` on a connection `via` to its
    /// server (in a cluster, following the redirections of its first
    /// command to its slot's master), whose replies are awaited as long as
    /// `wait` (its `BLOCK`) needs; only a call that does not wait goes on
    /// the shared connection.
    async fn routed(
        &self,
        name: &str,
        pipe: &redis::Pipeline,
        via: Via,
        wait: Wait,
    ) -> Result<Vec<Value>> {
        let mut route = Route::start(&self.endpoint, name);
        let timeout = self.options.response_timeout;
        loop {
            // `ASKING` applies to the connection's next command, which on
            // the shared one may be another task's.
            let via = if route.asking && via == Via::Shared {
                Via::Idle
            } else {
                via
            };
            let conn = borrow(&self.pools, &route.client, via, timeout).await?;
            let mut call = conn.timed(wait.timeout(timeout));
            if route.asking {
                let _: Value = redis::cmd("ASKING").query_async(&mut call).await?;
            }
            let replies: Vec<Value> = pipe.query_async(&mut call).await?;
            conn.give_back(&self.pools, &route.client);
            match replies.first() {
                Some(Value::ServerError(e)) => {
                    route.follow(&self.endpoint, name, e.clone().into())?;
                }
                _ => return Ok(replies),
            }
        }
    }
}

/// The plain lock, as [`crate::Lock`].
#[derive(Clone)]
pub struct Lock(Handle);

impl Lock {
    lock_builders!(Lock, "the watchdog's tokio task", fenced, non_reentrant);

    /// The owner this handle's holds belong to.
    pub fn owner(&self) -> &str {
        &self.0.owner
    }

    hold_calls!(
        None => is_held, unlock, acquire, try_acquire:
        "the lock" of "this handle's owner", async await
    );
}

/// The read-write lock, as [`crate::ReadWriteLock`].
#[derive(Clone)]
pub struct ReadWriteLock(Handle);

impl ReadWriteLock {
    lock_builders!(ReadWriteLock, "the watchdog's tokio task", fenced);

    /// The owner this handle's holds belong to (its read and write holds
    /// share it, so the writer may also read).
    pub fn owner(&self) -> &str {
        &self.0.owner
    }

    hold_calls!(
        Some(Kind::Read) => is_read_held, unlock_read, read, try_read:
        "a read hold" of "this handle's owner", async await
    );

    hold_calls!(
        Some(Kind::Write) => is_write_held, unlock_write, write, try_write:
        "the write hold" of "this handle's owner", async await
    );
}

/// Several holds taken at once, as [`crate::MultiLock`].
#[derive(Clone)]
pub struct MultiLock(Handle);

impl MultiLock {
    lock_builders!(MultiLock, "the watchdog's tokio task");

    multi_builders!(MultiLock);

    /// The owner this handle's holds belong to.
    pub fn owner(&self) -> &str {
        &self.0.owner
    }

    hold_calls!(
        None => is_held, unlock, acquire, try_acquire:
        "every hold" of "this handle's owner", async await
    );
}

/// The semaphore, as [`crate::Semaphore`]: a wait is a future, and
/// dropping it closes its connection, which takes the waiter off the server.
#[derive(Clone)]
pub struct Semaphore(Handle);

semaphore_calls!(Guard, async await);

/// The permit-expirable semaphore, as [`crate::PermitExpirableSemaphore`]:
/// a wait is a future, and dropping it closes its connection, which takes
/// the waiter off the server; the watchdog is a tokio task.
#[derive(Clone)]
pub struct PermitExpirableSemaphore(Handle);

permit_calls!(Guard, "the watchdog's tokio task", async await);

/// The count-down latch, as [`crate::CountDownLatch`]: a wait is a future,
/// and dropping it closes its connection, which takes the waiter off the
/// server.
#[derive(Clone)]
pub struct CountDownLatch(Handle);

impl CountDownLatch {
    latch_calls!(async await);
}

/// A hold. Dropped inside a tokio runtime, it is released by a task spawned
/// on it; [`Guard::release`] releases it and tells the outcome.
pub struct Guard {
    hold: Hold,
    /// A session's hold's connection, which the server binds it to.
    session: Option<MultiplexedConnection>,
    /// Where a release finds its connection (any other hold's).
    pools: Pools,
    released: bool,
    watchdog: Option<AsyncWatchdog>,
}

impl Guard {
    guard_calls!(AsyncWatchdog);

    /// The guard of what `granted` took, as the blocking client's.
    async fn start(granted: Granted<Borrowed>, pools: Pools, watched: bool) -> Result<Guard> {
        let mut guard = Guard {
            hold: granted.hold,
            session: granted.session.map(|borrowed| borrowed.conn),
            pools,
            released: false,
            watchdog: None,
        };
        if let Err(e) = granted.synced {
            let _ = guard.release_now().await;
            return Err(e);
        }
        if watched {
            let hold = &guard.hold;
            guard.watchdog = Some(AsyncWatchdog::start(hold.place.clone(), hold.renewal()));
        }
        Ok(guard)
    }

    /// Releases the hold now. [`crate::Error::NotHeld`]: the owner no
    /// longer held it (its lease ran out, or it was forced open).
    pub async fn release(mut self) -> Result<()> {
        self.release_now().await
    }

    async fn release_now(&mut self) -> Result<()> {
        let lost = self.stop_watching()?;
        release(&self.hold, &self.pools, self.session.take()).await?;
        if lost {
            return Err(Error::NotHeld);
        }
        Ok(())
    }
}

/// Sends `hold`'s release (followed through Sentinel, to the master named
/// then), with its owner's turn on the hold (see `handle::Holds`), and
/// settles its outcome.
async fn release(hold: &Hold, pools: &Pools, session: Option<MultiplexedConnection>) -> Result<()> {
    let followed = hold.place.followed();
    follow(followed, pools).await;
    let turn = hold.holds.turn(hold.keys()).await;
    let release = hold.release(&turn);
    let sent = send_release(hold, &release, pools, session).await;
    let outcome = hold.settled(&turn, &release, sent);
    if let (Err(e), Some(followed)) = (&outcome, followed) {
        followed.failed(e);
    }
    outcome
}

/// Sends `release` on its session's connection, or on the shared one (a
/// new one when it cannot be sent again), again on a new connection if that
/// one failed and the release can be resent: the replies, and whether they
/// are the resend's. A session's connection is closed after it (dropped
/// here), never reused: the server may have bound more to it (the owner's
/// other levels of the hold).
async fn send_release(
    hold: &Hold,
    release: &Release,
    pools: &Pools,
    session: Option<MultiplexedConnection>,
) -> Result<(Vec<Value>, bool)> {
    let timeout = hold.response_timeout;
    let client = hold.place.client();
    let conn = match session {
        Some(conn) => Borrowed {
            conn,
            shared: false,
        },
        None => {
            let via = if release.resendable {
                Via::Shared
            } else {
                Via::New
            };
            borrow(pools, &client, via, timeout).await?
        }
    };
    match release.pipe.query_async(&mut conn.timed(timeout)).await {
        Ok(v) => {
            if !hold.session {
                conn.give_back(pools, &client);
            }
            Ok((v, false))
        }
        Err(e) if is_io(&e) && release.resendable => {
            pools.forget_multiplexed(&client);
            let followed = hold.place.followed();
            if let Some(followed) = followed {
                followed.suspect();
                follow(Some(followed), pools).await;
            }
            let client = hold.place.client();
            let conn = borrow(pools, &client, Via::New, timeout).await?;
            let replies = release.pipe.query_async(&mut conn.timed(timeout)).await?;
            if !hold.session {
                conn.give_back(pools, &client);
            }
            Ok((replies, true))
        }
        Err(e) => Err(e.into()),
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        if self.stop_watching().is_err() {
            return;
        }
        // Outside a runtime nothing can be sent: the lease (or, for a
        // session, the connection closing) ends the hold.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            let hold = self.hold.clone();
            let pools = self.pools.clone();
            let session = self.session.take();
            runtime.spawn(async move {
                let _ = release(&hold, &pools, session).await;
            });
        }
    }
}

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.hold.fmt_guard(f)
    }
}
