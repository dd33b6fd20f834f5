//! The blocking client's acquisition, on a connection of its own, and the
//! guard it returns: the hold, its connection, its watchdog, its release.
//! Every blocking lock kind (plain, read-write, multi) acquires through it.

use std::time::Duration;

use redis::{Cmd, Connection, Value};

use crate::cluster::Route;
use crate::command::{acquire_error, is_io, Target, Wait};
use crate::connection::connect;
use crate::error::{Error, Result};
use crate::handle::{self, Hold};
use crate::options::Options;
use crate::sync;
use crate::watchdog::Watchdog;

/// A blocking lock handle: its owner, when set, replaces the calling
/// thread's.
pub(crate) type Handle = handle::Handle<Option<String>>;

impl Handle {
    /// Takes the hold `target` for this thread's owner.
    pub fn acquire(&self, target: &Target, wait: Wait) -> Result<Guard> {
        let options = &self.options;
        let mut acquisition = self.acquisition(target, wait, self.thread_owner())?;
        // Each acquisition has a connection of its own: a BLOCK parks it,
        // and a session hold lives as long as it.
        let timeout = wait.timeout(options.response_timeout);
        let name = acquisition.name;
        let sent = match self.routed(name, &acquisition.cmd, timeout) {
            Err(Error::Redis(e)) if is_io(&e) && acquisition.resendable() => {
                // The reply was lost: once more, on a new connection, with
                // the same request id (see `Acquisition::resend`).
                let cmd = acquisition.resend().clone();
                let timeout = acquisition.wait.timeout(options.response_timeout);
                self.routed(name, &cmd, timeout)
            }
            other => other,
        };
        let (client, conn, reply) = sent.map_err(acquire_error)?;
        let token = target.acquired(reply, acquisition.wait)?;
        let touch = acquisition.touch();
        conn.set_read_timeout(options.response_timeout)?;
        let mut guard = Guard {
            hold: Hold::new(client, self, target, acquisition, token),
            conn: Some(conn),
            watchdog: None,
        };
        if let Err(e) = guard.check_replicas(options, touch) {
            // Not acknowledged: released rather than held on a master that
            // could lose it.
            let _ = guard.release_now();
            return Err(e);
        }
        if options.watchdog() {
            let hold = &guard.hold;
            guard.watchdog = Some(Watchdog::start(hold.client.clone(), hold.renewal()));
        }
        Ok(guard)
    }

    /// True when this thread's owner holds every hold of `target`, as the
    /// server says (a hold lost to its lease or forced open is not held).
    pub fn is_held(&self, target: &Target) -> Result<bool> {
        target.check()?;
        let owner = self.thread_owner();
        for (name, cmd) in target.held(&owner) {
            let (_, _, reply) = self.routed(&name, &cmd, self.options.response_timeout)?;
            if reply != Value::Int(1) {
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
        let options = &self.options;
        let name = target.name();
        // Where it is sent is found by the routing below; the hold only
        // spells the release.
        let hold = Hold {
            client: self.endpoint.node(name),
            target: target.clone(),
            owner: self.thread_owner(),
            token: None,
            lease_ms: options.lease_ms(),
            session: options.session,
            response_timeout: options.response_timeout,
            on_lost: None,
            requests: Vec::new(),
        };
        let (cmd, request) = hold.release();
        let timeout = options.response_timeout;
        let (_, mut conn, reply) = match self.routed(name, &cmd, timeout) {
            Err(Error::Redis(e)) if is_io(&e) && request.is_some() => {
                self.routed(name, &cmd, timeout)?
            }
            other => other?,
        };
        if let Some(request) = request {
            let _: Value = hold.forget(&request).query(&mut conn)?;
        }
        target.released(&reply)
    }

    /// Sends `cmd` about the lock `name` on a new connection to its server
    /// (in a cluster, following the redirections to its slot's master),
    /// awaiting the reply at most `timeout`: that server, the connection
    /// and the reply.
    fn routed(
        &self,
        name: &str,
        cmd: &Cmd,
        timeout: Option<Duration>,
    ) -> Result<(redis::Client, Connection, Value)> {
        let mut route = Route::start(&self.endpoint, name);
        loop {
            let mut conn = connect(&route.client, self.options.response_timeout)?;
            if route.asking {
                let _: Value = redis::cmd("ASKING").query(&mut conn)?;
            }
            conn.set_read_timeout(timeout)?;
            match cmd.query::<Value>(&mut conn) {
                Ok(reply) => return Ok((route.client, conn, reply)),
                Err(e) => route.follow(&self.endpoint, name, e)?,
            }
        }
    }
}

/// A hold, released when dropped (or by [`Guard::release`]). While it
/// lives, its watchdog (if any) renews it.
pub struct Guard {
    hold: Hold,
    conn: Option<Connection>,
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

    /// The replica check; `touch` (after a resend) is written first, on
    /// the same connection, for `WAIT` to count the grant.
    fn check_replicas(&mut self, options: &Options, touch: Option<Cmd>) -> Result<()> {
        let sync_options = &options.sync;
        let Some(conn) = self.conn.as_mut().filter(|_| sync_options.enabled) else {
            return Ok(());
        };
        if let Some(touch) = touch {
            let _: Value = touch.query(conn)?;
        }
        let info: String = sync::info().query(conn)?;
        let master = sync::Master::of(&info);
        if master.replicas == 0 && !(sync_options.aof && master.aof) {
            return Ok(());
        }
        // WAIT and WAITAOF count this connection's own writes, so they are
        // sent on it, with a read timeout covering them.
        conn.set_read_timeout(sync::timeout(
            options.response_timeout,
            sync_options.timeout,
        ))?;
        if master.replicas > 0 {
            let reply: Value = sync::wait(master.replicas, sync_options).query(conn)?;
            sync::waited(&reply, master.replicas, sync_options)?;
        }
        if sync_options.aof && master.aof {
            if let Some(reply) = sync::aof_reply(sync::wait_aof(sync_options).query(conn))? {
                sync::fsynced(&reply, master.replicas, sync_options)?;
            }
        }
        conn.set_read_timeout(options.response_timeout)?;
        Ok(())
    }

    fn release_now(&mut self) -> Result<()> {
        // A hold the watchdog found gone is not held, whatever the release
        // replies (a fair lock's replies 1 once the lock is gone).
        let lost = self.is_lost();
        if let Some(mut w) = self.watchdog.take() {
            w.stop();
        }
        // Released already (what a drop after `release` finds).
        let Some(mut conn) = self.conn.take() else {
            return Err(Error::NotHeld);
        };
        let hold = &self.hold;
        let (cmd, request) = hold.release();
        let reply: Value = match cmd.query(&mut conn) {
            Ok(v) => v,
            Err(e) if is_io(&e) && request.is_some() => {
                conn = connect(&hold.client, hold.response_timeout)?;
                cmd.query(&mut conn)?
            }
            Err(e) => return Err(e.into()),
        };
        if let Some(request) = request {
            let _: Value = hold.forget(&request).query(&mut conn)?;
        }
        hold.target.released(&reply)?;
        if lost {
            return Err(Error::NotHeld);
        }
        Ok(())
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
