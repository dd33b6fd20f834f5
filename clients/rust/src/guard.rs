//! The blocking client's acquisition, on a connection borrowed from the
//! client's pool, and the guard it returns: the hold, its watchdog, its
//! release (a session's hold: its connection too).
//! Every blocking lock kind (plain, read-write, multi) acquires through it.

use std::time::{Duration, Instant};

use redis::{Cmd, Connection, Pipeline, Value};

use crate::cluster::Route;
use crate::command::{acquire_error, is_io, Target, Wait};
use crate::connection::{checkout, connect};
use crate::error::{Error, Result};
use crate::handle::{self, first, single, Hold};
use crate::pool::Pool;
use crate::sentinel::{Followed, Place};
use crate::sync::{self, Plan, Trip};
use crate::watchdog::Watchdog;

/// A blocking lock handle: its owner, when set, replaces the calling
/// thread's.
pub(crate) type Handle = handle::Handle<Option<String>>;

/// An acquisition's round trip, answered: the master, the connection, the
/// acquisition's reply, what was sent after it and those replies.
struct Sent {
    client: redis::Client,
    conn: Connection,
    reply: Value,
    plan: Plan,
    after: Vec<Value>,
}

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
        let options = &self.options;
        let mut acquisition = self.acquisition(target, wait, self.thread_owner())?;
        // Each acquisition has a connection to itself while it runs: a
        // BLOCK parks it. One that can be sent again borrows an idle one.
        let name = acquisition.name;
        let reuse = acquisition.resendable();
        let sent = match self.send(name, &acquisition.cmd, None, wait, reuse) {
            Err(Error::Redis(e)) if is_io(&e) && acquisition.resendable() => {
                // The reply was lost: once more, on a new connection, with
                // the same request id (see `Acquisition::resend`); the idle
                // connections to that server are suspect too. Followed
                // through Sentinel, on the master named now: a grant the
                // first send made and replicated answers from its latch
                // there too.
                self.lost(name, e);
                let cmd = acquisition.resend().clone();
                let touch = acquisition.touch();
                self.send(name, &cmd, touch.as_ref(), acquisition.wait, false)
            }
            other => other,
        };
        let Sent {
            client,
            conn,
            reply,
            plan,
            after,
        } = sent.map_err(acquire_error)?;
        // Read whether or not it was granted: it learns of the master.
        let synced = plan.read(&after, &self.masters, &self.endpoint.learned_key(&client));
        let pool = self.pools.blocking.clone();
        // Its replies all came: the connection is clean. A session's hold
        // is bound to it: its guard keeps it.
        let session = if options.session {
            Some(conn)
        } else {
            pool.give_back(&client, conn);
            None
        };
        let token = target.acquired(reply, acquisition.wait)?;
        let mut guard = Guard {
            hold: Hold::new(client, self, target, acquisition, token),
            session,
            pool,
            released: false,
            watchdog: None,
        };
        if let Err(e) = synced {
            // Not acknowledged: released rather than held on a master that
            // could lose it.
            let _ = guard.release_now();
            return Err(e);
        }
        if options.watchdog() {
            let hold = &guard.hold;
            guard.watchdog = Some(Watchdog::start(hold.place.clone(), hold.renewal()));
        }
        Ok(guard)
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
    ) -> Result<Sent> {
        let options = &self.options;
        let none = Plan::none();
        let mut route = Route::start(&self.endpoint, name);
        loop {
            let timeout = options.response_timeout;
            let pool = &self.pools.blocking;
            let mut conn = checkout(pool, &route.client, reuse, timeout, timeout)?;
            let master = self.endpoint.learned_key(&route.client);
            let plan = match self.plan(&master) {
                Some(plan) => plan,
                None => {
                    let asked = Instant::now();
                    let info: String = sync::info().query(&mut conn)?;
                    self.masters.learn(&master, &info, asked);
                    self.plan(&master).unwrap_or_else(Plan::none)
                }
            };
            // A node that may redirect (the slot's master unknown yet): the
            // checks wait for the reply, in a round trip of their own.
            let deferred = !route.asking && !self.endpoint.knows(name);
            let trip = Trip::new(
                route.asking,
                cmd,
                touch,
                if deferred { &none } else { &plan },
            );
            // A BLOCK waits first, then WAIT and WAITAOF behind it.
            let timeout = sync::timeout(wait.timeout(options.response_timeout), plan.extra());
            conn.set_read_timeout(timeout)?;
            let (reply, mut after) = trip.split(trip.pipe.query(&mut conn)?)?;
            if deferred && !matches!(reply, Value::ServerError(_)) && !plan.commands().is_empty() {
                after = sync::checks(&plan).query(&mut conn)?;
            }
            match reply {
                Value::ServerError(e) => {
                    let e = redis::RedisError::from(e);
                    if let Some(not_synced) = sync::no_replicas(&e, &plan) {
                        return Err(not_synced);
                    }
                    // Answered: the connection serves another call.
                    self.pools.blocking.give_back(&route.client, conn);
                    route.follow(&self.endpoint, name, e)?;
                }
                reply => {
                    return Ok(Sent {
                        client: route.client,
                        conn,
                        reply,
                        plan,
                        after,
                    })
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
        let owner = self.thread_owner();
        for (name, cmd) in target.held(&owner) {
            let timeout = self.options.response_timeout;
            let ask = single(&cmd);
            let replies = match self.routed(&name, &ask, timeout, true) {
                // A read: asked again on a new connection when an idle one
                // failed (the server closed it meanwhile).
                Err(Error::Redis(e)) if is_io(&e) => {
                    self.lost(&name, e);
                    self.routed(&name, &ask, timeout, false)?
                }
                other => other?,
            };
            if first(replies)? != Value::Int(1) {
                return Ok(false);
            }
        }
        Ok(true)
    }

    /// Releases one hold of `target` of this thread's owner without its
    /// guard, as a guard's release does (a single lock's with a request
    /// id, sent again once on a connection failure).
    pub fn unlock(&self, target: &Target) -> Result<()> {
        target.check()?;
        self.followed(|| self.release(target))
    }

    fn release(&self, target: &Target) -> Result<()> {
        let options = &self.options;
        let name = target.name();
        // Where it is sent is found by the routing below; the hold only
        // spells the release.
        let hold = Hold {
            place: Place::Fixed(self.endpoint.node(name)),
            target: target.clone(),
            owner: self.thread_owner(),
            token: None,
            lease_ms: options.lease_ms(),
            session: options.session,
            response_timeout: options.response_timeout,
            on_lost: None,
            requests: Vec::new(),
            holds: self.holds.clone(),
        };
        let release = hold.release();
        let timeout = options.response_timeout;
        let reuse = release.resendable;
        let replies = match self.routed(name, &release.pipe, timeout, reuse) {
            Err(Error::Redis(e)) if is_io(&e) && release.resendable => {
                self.lost(name, e);
                self.routed(name, &release.pipe, timeout, false)?
            }
            other => other?,
        };
        hold.released(replies)
    }

    /// Sends `pipe` about the lock `name` on a connection to its server (in
    /// a cluster, following the redirections of its first command to its
    /// slot's master), an idle one when `reuse`, awaiting the replies at
    /// most `timeout`.
    fn routed(
        &self,
        name: &str,
        pipe: &Pipeline,
        timeout: Option<Duration>,
        reuse: bool,
    ) -> Result<Vec<Value>> {
        let mut route = Route::start(&self.endpoint, name);
        let pool = &self.pools.blocking;
        let connect_timeout = self.options.response_timeout;
        loop {
            let mut conn = checkout(pool, &route.client, reuse, connect_timeout, timeout)?;
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
    /// The fencing token a fenced acquisition took.
    pub fn token(&self) -> Option<i64> {
        self.hold.token
    }

    /// The owner holding it.
    pub fn owner(&self) -> &str {
        &self.hold.owner
    }

    /// True once the watchdog found the hold gone (its lease ran out, or it
    /// was forced open or deleted): whatever it protected is no longer
    /// protected. Always false without a watchdog.
    pub fn is_lost(&self) -> bool {
        self.watchdog.as_ref().is_some_and(Watchdog::is_lost)
    }

    /// Releases the hold now. [`crate::Error::NotHeld`]: the owner no
    /// longer held it (its lease ran out, or it was forced open).
    pub fn release(mut self) -> Result<()> {
        self.release_now()
    }

    fn release_now(&mut self) -> Result<()> {
        // A hold the watchdog found gone is not held, whatever the release
        // replies (a fair lock's replies 1 once the lock is gone).
        let lost = self.is_lost();
        if let Some(mut w) = self.watchdog.take() {
            w.stop();
        }
        // Released already (what a drop after `release` finds).
        if std::mem::replace(&mut self.released, true) {
            return Err(Error::NotHeld);
        }
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

    /// The release, sent on the session's connection or a connection to the
    /// hold's master, and sent again once on a new one when the reply was
    /// lost and it can be (followed through Sentinel, to the master named
    /// then).
    fn send_release(&mut self, followed: Option<&Followed>) -> Result<()> {
        let hold = &self.hold;
        let release = hold.release();
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
        let replies: Vec<Value> = match release.pipe.query(&mut conn) {
            Ok(v) => v,
            Err(e) if is_io(&e) && release.resendable => {
                self.pool.clear(&client);
                if let Some(followed) = followed {
                    followed.suspect();
                    self.follow(Some(followed));
                    client = followed.master();
                }
                conn = connect(&client, timeout)?;
                release.pipe.query(&mut conn)?
            }
            Err(e) => return Err(e.into()),
        };
        if !hold.session {
            self.pool.give_back(&client, conn);
        }
        hold.released(replies)
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
