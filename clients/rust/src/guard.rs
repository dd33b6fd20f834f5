//! The blocking client's acquisition, on a connection of its own, and the
//! guard it returns: the hold, its connection, its watchdog, its release.
//! Every blocking lock kind (plain, read-write, multi) acquires through it.

use redis::{Connection, Value};

use crate::cluster::Route;
use crate::command::{is_io, Target, Wait};
use crate::connection::connect;
use crate::error::Result;
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
        let acquisition = self.acquisition(target, wait, self.thread_owner())?;
        // Each acquisition has a connection of its own: a BLOCK parks it,
        // and a session hold lives as long as it.
        let name = acquisition.name;
        let mut route = Route::start(&self.endpoint, name);
        let (conn, reply) = loop {
            let mut conn = connect(&route.client, options.response_timeout)?;
            if route.asking {
                let _: Value = redis::cmd("ASKING").query(&mut conn)?;
            }
            conn.set_read_timeout(wait.timeout(options.response_timeout))?;
            match acquisition.cmd.query::<Value>(&mut conn) {
                Ok(reply) => break (conn, reply),
                Err(e) => route.follow(&self.endpoint, name, e)?,
            }
        };
        let token = target.acquired(reply)?;
        conn.set_read_timeout(options.response_timeout)?;
        let mut guard = Guard {
            hold: Hold::new(route.client, target, acquisition, token, options),
            conn: Some(conn),
            watchdog: None,
        };
        if let Err(e) = guard.check_replicas(options) {
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

    /// Releases the hold now. `Ok(false)`: the owner no longer held it.
    pub fn release(mut self) -> Result<bool> {
        self.release_now()
    }

    fn check_replicas(&mut self, options: &Options) -> Result<()> {
        let sync_options = &options.sync;
        let Some(conn) = self.conn.as_mut().filter(|_| sync_options.enabled) else {
            return Ok(());
        };
        let role: Value = sync::role().query(conn)?;
        let replicas = sync::replicas(&role);
        if replicas == 0 {
            return Ok(());
        }
        conn.set_read_timeout(sync::timeout(
            options.response_timeout,
            sync_options.timeout,
        ))?;
        let aof = if sync_options.aof {
            sync::aof_reply(sync::wait_aof(replicas, sync_options).query(conn))?
        } else {
            None
        };
        let reply = match aof {
            Some(v) => v,
            None => sync::wait(replicas, sync_options).query(conn)?,
        };
        conn.set_read_timeout(options.response_timeout)?;
        sync::settled(&reply, replicas, sync_options)
    }

    fn release_now(&mut self) -> Result<bool> {
        if let Some(mut w) = self.watchdog.take() {
            w.stop();
        }
        let Some(mut conn) = self.conn.take() else {
            return Ok(false);
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
        hold.target.released(&reply)
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
