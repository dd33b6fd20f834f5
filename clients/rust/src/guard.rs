//! The blocking client's acquisition, on a connection borrowed from the
//! client's pool, and the guard it returns: the hold, its watchdog, its
//! release (a session's hold: its connection too).
//! Every blocking lock kind (plain, read-write, multi) acquires through it.

use std::time::Instant;

use redis::{Cmd, Connection, Pipeline, Value};

use crate::builders::guard_calls;
use crate::cluster::Route;
use crate::command::{acquire_error, is_io, Target, Wait};
use crate::connection::{checkout, connect};
use crate::error::{Error, Result};
use crate::handle::{self, exists, first, hold_keys, single, Granted, Hold, Release, Sent};
use crate::pool::Pool;
use crate::sentinel::Followed;
use crate::sync;
use crate::watchdog::Watchdog;

/// A blocking lock handle: its owner, when set, replaces the calling
/// thread's.
pub(crate) type Handle = handle::Handle<Option<String>>;

impl Handle {
    /// Asks a followed deployment's Sentinels where its master is, when a
    /// call failed since they were last asked; the idle connections to a
    /// master that moved are closed.
    fn follow(&self) {
        if let Some(before) = self
            .endpoint
            .followed()
            .and_then(Followed::refresh_blocking)
        {
            self.pools.blocking.clear(&before);
        }
    }

    /// `call` on the master of the moment: a followed deployment's
    /// Sentinels are asked first when a call failed since, and again
    /// before the next call when this one fails as one to a master that
    /// moved does.
    fn followed<T>(&self, call: impl FnOnce() -> Result<T>) -> Result<T> {
        self.follow();
        let outcome = call();
        if let Err(e) = &outcome {
            self.endpoint.failed(e);
        }
        outcome
    }

    /// The connection to `name`'s server failed with `e`: its idle
    /// connections are closed, and a followed deployment's Sentinels asked
    /// where the master is before the call is sent again.
    fn lost(&self, name: &str, e: redis::RedisError) {
        self.pools.blocking.clear(&self.endpoint.node(name));
        self.endpoint.failed(&e.into());
        self.follow();
    }

    /// Takes the hold `target` for this thread's owner.
    pub fn acquire(&self, target: &Target, wait: Wait) -> Result<Guard> {
        self.followed(|| self.take(target, wait))
    }

    fn take(&self, target: &Target, wait: Wait) -> Result<Guard> {
        let owner = self.thread_owner();
        let turn = self.holds.turn_blocking(hold_keys(target, &owner));
        let mut acquisition = self.acquisition(target, wait, owner, turn)?;
        // Each acquisition has a connection to itself while it runs: a
        // BLOCK parks it. One that can be sent again borrows an idle one.
        let name = acquisition.name;
        let reuse = acquisition.resendable();
        let sent = match self.send(name, &acquisition.cmd, None, wait, reuse) {
            Err(Error::Redis(e)) if is_io(&e) && acquisition.resendable() => {
                // The reply was lost: once more, on a new connection (see
                // `Acquisition::resend`); the idle connections to that
                // server are suspect too. Followed through Sentinel, on the
                // master named now: a grant the first send made and
                // replicated is answered granted there too.
                self.lost(name, e);
                let cmd = acquisition.resend().clone();
                let touch = acquisition.touch();
                self.send(name, &cmd, touch.as_ref(), acquisition.wait, false)
            }
            other => other,
        };
        let pool = self.pools.blocking.clone();
        let give_back = |client: &redis::Client, conn| pool.give_back(client, conn);
        let granted = self.granted(target, acquisition, sent.map_err(acquire_error)?, give_back)?;
        Guard::start(granted, pool, self.watched(target))
    }

    /// The acquisition `cmd` in one round trip on a connection to its
    /// master (in a cluster, following the redirections to its slot's
    /// master), an idle one when `reuse`: after a resend `touch`, then what
    /// the plan for that master waits for. The master's `INFO` is asked
    /// first, in a round trip of its own, only when nothing is known of it
    /// yet.
    fn send(
        &self,
        name: &str,
        cmd: &Cmd,
        touch: Option<&Cmd>,
        wait: Wait,
        reuse: bool,
    ) -> Result<Sent<Connection>> {
        let timeout = self.options.response_timeout;
        let pool = &self.pools.blocking;
        let mut route = Route::start(&self.endpoint, name);
        loop {
            let mut conn = checkout(pool, &route.client, reuse, timeout, timeout)?;
            let master = self.endpoint.learned_key(&route.client);
            let plan = match self.plan(&master) {
                Some(plan) => plan,
                None => {
                    let asked = Instant::now();
                    let info: String = sync::info().query(&mut conn)?;
                    self.learned(&master, &info, asked)
                }
            };
            // A BLOCK waits first, then WAIT and WAITAOF behind it.
            conn.set_read_timeout(sync::timeout(wait.timeout(timeout), plan.extra()))?;
            let trip = self.trip(&route, name, cmd, touch, plan);
            let replies = trip.pipe.query(&mut conn)?;
            let mut answered = trip.split(replies)?;
            if let Some(checks) = answered.checks() {
                answered.after = checks.query(&mut conn)?;
            }
            match answered.refusal()? {
                None => return Ok(Sent { conn, answered }),
                Some(e) => {
                    // Answered: the connection serves another call.
                    pool.give_back(&route.client, conn);
                    route.follow(&self.endpoint, name, e)?;
                }
            }
        }
    }

    /// True when this thread's owner holds every hold of `target`, as the
    /// server says (a hold lost to its lease or forced open is not held).
    pub fn is_held(&self, target: &Target) -> Result<bool> {
        target.check()?;
        self.followed(|| self.held(target))
    }

    fn held(&self, target: &Target) -> Result<bool> {
        for (name, cmd) in target.held(&self.thread_owner()) {
            // A read: asked again on a new connection when an idle one
            // failed (the server closed it meanwhile).
            if !exists(self.resent(&name, Wait::No, true, |_| single(&cmd))?.0)? {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// The reply of `cmd`, a command on the handle's name that takes no
    /// request id (a semaphore's or a latch's), on an idle connection when
    /// it can be sent again (`resendable`: it changes nothing, or the same
    /// whenever it runs), and then once more on a new one when its reply
    /// was lost; else on a new one, its lost reply raised.
    pub fn call(&self, cmd: &Cmd, resendable: bool) -> Result<Value> {
        self.wait_call(|_| cmd.clone(), Wait::No, resendable)
    }

    /// The reply of the command `cmd` makes for a wait on the server (its
    /// `BLOCK`), as [`Handle::call`] sends it, on a connection whose read
    /// timeout covers the wait; a resend waits for what is left of it.
    pub fn wait_call(
        &self,
        cmd: impl Fn(Wait) -> Cmd,
        wait: Wait,
        resendable: bool,
    ) -> Result<Value> {
        self.target.check()?;
        self.followed(|| {
            first(
                self.resent(self.name(), wait, resendable, |w| single(&cmd(w)))?
                    .0,
            )
        })
    }

    /// Releases one hold of `target` of this thread's owner without its
    /// guard, as a guard's release does (a single lock's with `HELD`, sent
    /// again once on a connection failure).
    pub fn unlock(&self, target: &Target) -> Result<()> {
        target.check()?;
        self.followed(|| self.release(target))
    }

    fn release(&self, target: &Target) -> Result<()> {
        let hold = self.unguarded(target, self.thread_owner());
        let turn = self.holds.turn_blocking(hold.keys());
        let release = hold.release(&turn);
        let sent = self.resent(target.name(), Wait::No, release.resendable, |_| {
            release.pipe.clone()
        });
        hold.settled(&turn, &release, sent)
    }

    /// Sends the pipeline `pipe` makes for `wait` about the lock `name` as
    /// `routed` does, on an idle connection when it can be sent again
    /// (`resendable`), and then once more on a new one when its reply was
    /// lost, waiting for what is left of `wait`: the replies, and whether
    /// they are the resend's.
    fn resent(
        &self,
        name: &str,
        wait: Wait,
        resendable: bool,
        pipe: impl Fn(Wait) -> Pipeline,
    ) -> Result<(Vec<Value>, bool)> {
        let started = Instant::now();
        match self.routed(name, &pipe(wait), resendable, wait) {
            Err(Error::Redis(e)) if is_io(&e) && resendable => {
                self.lost(name, e);
                let left = wait.left(started.elapsed());
                Ok((self.routed(name, &pipe(left), false, left)?, true))
            }
            other => Ok((other?, false)),
        }
    }

    /// Sends `pipe` about the lock `name` on a connection to its server (in
    /// a cluster, following the redirections of its first command to its
    /// slot's master), an idle one when `reuse`, whose replies are awaited
    /// as long as `wait` (its `BLOCK`) needs.
    fn routed(&self, name: &str, pipe: &Pipeline, reuse: bool, wait: Wait) -> Result<Vec<Value>> {
        let mut route = Route::start(&self.endpoint, name);
        let pool = &self.pools.blocking;
        let timeout = self.options.response_timeout;
        loop {
            let mut conn = checkout(pool, &route.client, reuse, timeout, wait.timeout(timeout))?;
            if route.asking {
                let _: Value = redis::cmd("ASKING").query(&mut conn)?;
            }
            let replies: Vec<Value> = pipe.query(&mut conn)?;
            pool.give_back(&route.client, conn);
            match replies.first() {
                Some(Value::ServerError(e)) => {
                    route.follow(&self.endpoint, name, e.clone().into())?;
                }
                _ => return Ok(replies),
            }
        }
    }
}

/// A hold, released when dropped (or by [`Guard::release`]). While it
/// lives, its watchdog (if any) renews it.
pub struct Guard {
    hold: Hold,
    /// A session's hold's connection, which the server binds it to.
    session: Option<Connection>,
    /// Where a release borrows its connection (any other hold's).
    pool: Pool<Connection>,
    released: bool,
    watchdog: Option<Watchdog>,
}

impl Guard {
    guard_calls!(Watchdog);

    /// The guard of what `granted` took (a watchdog renewing it when
    /// `watched`), or its release when the replicas did not acknowledge
    /// it: released rather than held on a master that could lose it.
    fn start(granted: Granted<Connection>, pool: Pool<Connection>, watched: bool) -> Result<Guard> {
        let mut guard = Guard {
            hold: granted.hold,
            session: granted.session,
            pool,
            released: false,
            watchdog: None,
        };
        if let Err(e) = granted.synced {
            let _ = guard.release_now();
            return Err(e);
        }
        if watched {
            let hold = &guard.hold;
            guard.watchdog = Some(Watchdog::start(hold.place.clone(), hold.renewal()));
        }
        Ok(guard)
    }

    /// Releases the hold now. [`crate::Error::NotHeld`]: the owner no
    /// longer held it (its lease ran out, or it was forced open);
    /// [`crate::Error::ReleaseUnknown`]: its last hold's release lost its
    /// reply and its resend found nothing held (it holds nothing now).
    pub fn release(mut self) -> Result<()> {
        self.release_now()
    }

    fn release_now(&mut self) -> Result<()> {
        let lost = self.stop_watching()?;
        let place = self.hold.place.clone();
        let followed = place.followed();
        self.follow(followed);
        let released = self.send_release(followed);
        if let (Err(e), Some(followed)) = (&released, followed) {
            followed.failed(e);
        }
        released?;
        if lost {
            return Err(Error::NotHeld);
        }
        Ok(())
    }

    /// Asks `followed`'s Sentinels where the master is when a call failed
    /// since; the idle connections to a master that moved are closed.
    fn follow(&self, followed: Option<&Followed>) {
        if let Some(before) = followed.and_then(Followed::refresh_blocking) {
            self.pool.clear(&before);
        }
    }

    /// The release, sent with the owner's turn on the hold (see
    /// `handle::Holds`), its outcome settled.
    fn send_release(&mut self, followed: Option<&Followed>) -> Result<()> {
        let turn = self.hold.holds.turn_blocking(self.hold.keys());
        let release = self.hold.release(&turn);
        let sent = self.send(&release, followed);
        self.hold.settled(&turn, &release, sent)
    }

    /// Sends `release` on the session's connection or a connection to the
    /// hold's master, and again once on a new one when the reply was lost
    /// and it can be (followed through Sentinel, to the master named then):
    /// the replies, and whether they are the resend's.
    fn send(
        &mut self,
        release: &Release,
        followed: Option<&Followed>,
    ) -> Result<(Vec<Value>, bool)> {
        let hold = &self.hold;
        let timeout = hold.response_timeout;
        let mut client = hold.place.client();
        // A session's connection is closed after its release (dropped
        // here), never reused: the server may have bound more to it (the
        // owner's other levels of the hold).
        let mut conn = match self.session.take() {
            Some(conn) => {
                conn.set_read_timeout(timeout)?;
                conn
            }
            None => checkout(&self.pool, &client, release.resendable, timeout, timeout)?,
        };
        let sent = match release.pipe.query(&mut conn) {
            Ok(v) => (v, false),
            Err(e) if is_io(&e) && release.resendable => {
                self.pool.clear(&client);
                if let Some(followed) = followed {
                    followed.suspect();
                    self.follow(Some(followed));
                    client = followed.master();
                }
                conn = connect(&client, timeout)?;
                (release.pipe.query(&mut conn)?, true)
            }
            Err(e) => return Err(e.into()),
        };
        if !hold.session {
            self.pool.give_back(&client, conn);
        }
        Ok(sent)
    }
}

impl Drop for Guard {
    fn drop(&mut self) {
        // Nothing to do if it fails: the lease ends the hold anyway.
        let _ = self.release_now();
    }
}

impl std::fmt::Debug for Guard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.hold.fmt_guard(f)
    }
}
