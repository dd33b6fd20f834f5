//! The methods the blocking and the async types share, written once (as
//! the `redis` crate writes its commands once for its connection types):
//! a client's (`client_builders!`: its constructors but the Sentinel's,
//! its settings and the lock makers), a lock handle's builders
//! (`lock_builders!`, a multi-lock's `multi_builders!`) and its calls
//! (`hold_calls!`, blocking or `async`), a guard's accessors
//! (`guard_calls!`) and a RedLock's builders (`redlock_builders!`). Each
//! type wraps a `handle::Client` or a `handle::Handle`, whose own method a
//! method calls, so the two clients' types differ in their I/O only. The
//! makers expect `Lock`, `ReadWriteLock` and `MultiLock` (tuple structs
//! over the client's handle) and a `fn handle(&self, target) -> Handle`
//! giving the handle its owner where they are expanded; the calls expect
//! `Guard`.

/// A client's constructors (but [`crate::Client::sentinel`], blocking or
/// async), settings and lock makers, for the client type `$client`.
macro_rules! client_builders {
    ($client:ident) => {
        /// A client of the server `client` connects to, with the default
        /// options.
        pub fn new(client: redis::Client) -> $client {
            $client($crate::handle::Client::new(
                $crate::cluster::Endpoint::Server(client),
            ))
        }

        /// A client of the Redis Cluster `seed` is a node of: each lock is
        /// taken on the master of its hash slot, found by following the
        /// cluster's redirections, and the replica check waits for that
        /// master's replicas. A multi-lock's names must share a hash tag.
        pub fn cluster(seed: redis::Client) -> $client {
            $client($crate::handle::Client::new(
                $crate::cluster::Endpoint::cluster(seed),
            ))
        }

        /// The same locks (client id, options, holds) on another master of
        /// the same replicated set: the one a Sentinel names after a
        /// failover. What was learned of the replicas is the deployment's
        /// and carries over, so a promoted replica's acquisitions wait for
        /// as many replicas as the old master's did
        /// ([`crate::Replicas::Auto`] never lowers it), which a new client
        /// for the new master would learn from a node that may not have
        /// them yet. Holds taken before are renewed and released on the
        /// master that granted them. (A client made by `sentinel` does this
        /// by itself, and stops following once given a master.)
        pub fn with_master(self, master: redis::Client) -> $client {
            $client(self.0.with_master(master))
        }

        /// The same locks with these options.
        pub fn with_options(self, options: $crate::options::Options) -> $client {
            $client(self.0.with_options(options))
        }

        /// The same locks with this client id (the first part of every
        /// owner) instead of the random UUID each client gets: for a
        /// process that must keep its owners across restarts. Never share
        /// one with another client or a Redisson instance: their owners
        /// would be the same. [`crate::Error::InvalidArgument`] when empty.
        pub fn with_client_id(self, client_id: &str) -> $crate::error::Result<$client> {
            Ok($client(self.0.with_client_id(client_id)?))
        }

        /// This client's id, the first part of its owners.
        pub fn client_id(&self) -> &str {
            self.0.client_id()
        }

        /// The plain lock `name` (Redisson's `getLock`).
        pub fn lock(&self, name: &str) -> Lock {
            Lock(self.handle($crate::command::Target::single(
                $crate::command::Kind::Lock,
                name,
            )))
        }

        /// The fenced lock `name` (Redisson's `getFencedLock`): every
        /// acquisition returns the next fencing token.
        pub fn fenced_lock(&self, name: &str) -> Lock {
            self.lock(name).fenced()
        }

        /// The fair lock `name` (Redisson's `getFairLock`, `RFairLock`):
        /// holders in the order they arrived, in one line with Redisson's
        /// own waiters (`FAIRLOCK.*`). A wait waits in the line on the
        /// server, which takes the waiter out of it when the wait runs out;
        /// a try (zero wait) never joins it (`NOQUEUE`); the watchdog renews
        /// it (`LOCK.RENEW`). `non_reentrant()` is Redisson's non-reentrant
        /// fair lock; a fair lock has no fencing tokens and no sessions
        /// (`fenced()` and `with_session()` make its acquisitions fail with
        /// [`crate::Error::InvalidArgument`]).
        pub fn fair_lock(&self, name: &str) -> Lock {
            Lock(
                self.handle($crate::command::Target::single(
                    $crate::command::Kind::Lock,
                    name,
                ))
                .fair(),
            )
        }

        /// The read-write lock `name` (Redisson's `getReadWriteLock`).
        pub fn read_write_lock(&self, name: &str) -> ReadWriteLock {
            ReadWriteLock(self.handle($crate::command::Target::single(
                $crate::command::Kind::Read,
                name,
            )))
        }

        /// A lock over several locks and read or write holds, taken and
        /// released all at once (`LOCK.ACQUIREALL`); add them with its
        /// builder.
        pub fn multi_lock(&self) -> MultiLock {
            MultiLock(self.handle($crate::command::Target::multi()))
        }
    };
}

/// A lock handle's builders, for the type `$lock`; `$watchdog` names where
/// an `on_lost` callback runs; `fenced` and `non_reentrant` add those.
macro_rules! lock_builders {
    ($lock:ident, $watchdog:literal $(, $extra:ident)*) => {
        $($crate::builders::lock_builders!(@$extra $lock);)*

        /// A fixed lease and no watchdog.
        pub fn with_lease(self, lease: std::time::Duration) -> $lock {
            $lock(self.0.with_lease(lease))
        }

        /// Holds bound to their connection, which the guard keeps open: the
        /// server renews them and releases them when it closes (`SESSION`).
        pub fn with_session(self) -> $lock {
            $lock(self.0.with_session())
        }

        #[doc = concat!(
            "Calls `on_lost`, on ",
            $watchdog,
            ", when a watchdog renewing a hold of this lock finds it gone \
             (its lease ran out, or it was forced open or deleted): whatever \
             the hold protected is no longer protected. Only holds with a \
             watchdog (no lease, no session) are watched."
        )]
        pub fn on_lost(
            self,
            on_lost: impl Fn(&$crate::watchdog::LostHold) + Send + Sync + 'static,
        ) -> $lock {
            $lock(self.0.on_lost(on_lost))
        }

        /// This owner instead of the one the client gives (blocking:
        /// `<client id>:<thread id>`; async: the handle's own).
        pub fn with_owner(self, owner: &str) -> $lock {
            $lock(self.0.with_owner(owner))
        }
    };
    (@fenced $lock:ident) => {
        /// Every acquisition (a read-write lock's: every write hold) takes
        /// the next fencing token (the guard's `token()`).
        pub fn fenced(self) -> $lock {
            $lock(self.0.fenced())
        }
    };
    (@non_reentrant $lock:ident) => {
        /// The holder taking the lock again is an error instead of a
        /// re-entry (`NOREENTRY`).
        pub fn non_reentrant(self) -> $lock {
            $lock(self.0.non_reentrant())
        }
    };
}

/// A multi-lock's builders adding its holds, for the type `$multi`.
macro_rules! multi_builders {
    ($multi:ident) => {
        /// Adds the plain lock `name`.
        pub fn lock(self, name: &str) -> $multi {
            self.hold($crate::command::Kind::Lock, name)
        }

        /// Adds a read hold of the read-write lock `name`.
        pub fn read(self, name: &str) -> $multi {
            self.hold($crate::command::Kind::Read, name)
        }

        /// Adds the write hold of the read-write lock `name`.
        pub fn write(self, name: &str) -> $multi {
            self.hold($crate::command::Kind::Write, name)
        }

        /// Adds a hold of this kind.
        pub fn hold(self, kind: $crate::command::Kind, name: &str) -> $multi {
            $multi(self.0.hold(kind, name))
        }
    };
}

/// The four calls on one kind of hold of a lock, named as given, returning
/// `Guard`: blocking, or futures with `async await` at the end. `$kind`
/// (an `Option<Kind>`) says which hold: a read-write lock's of that kind,
/// or (None) the handle's whole target (a plain lock's, a multi-lock's
/// holds). `$what` names the hold, `$whose` its owner.
macro_rules! hold_calls {
    (
        $kind:expr => $is_held:ident, $unlock:ident, $acquire:ident, $try_acquire:ident:
        $what:literal of $whose:literal $(, $async:tt $await:tt)?
    ) => {
        #[doc = concat!(
            "True when ", $whose, " has ", $what, ", as the server says \
             (Redisson's `isHeldByCurrentThread`): false once its lease ran \
             out or it was forced open."
        )]
        pub $($async)? fn $is_held(&self) -> $crate::error::Result<bool> {
            self.0.is_held(&self.0.targeted($kind))$(.$await)?
        }

        #[doc = concat!(
            "Releases ", $what, " of ", $whose, " once (one level of a \
             re-entered hold) without its guard (Redisson's `unlock()`), for \
             a hold whose guard was forgotten (`std::mem::forget`) or is out \
             of reach: a guard still alive would release another hold when \
             dropped. [`crate::Error::NotHeld`] when the owner held none (a \
             multi-lock's: any of its holds; those held are released all the \
             same)."
        )]
        pub $($async)? fn $unlock(&self) -> $crate::error::Result<()> {
            self.0.unlock(&self.0.targeted($kind))$(.$await)?
        }

        #[doc = concat!("Takes ", $what, ", waiting on the server as long as it takes.")]
        pub $($async)? fn $acquire(&self) -> $crate::error::Result<Guard> {
            let forever = $crate::command::Wait::Forever;
            self.0.acquire(&self.0.targeted($kind), forever)$(.$await)?
        }

        #[doc = concat!(
            "Takes ", $what, ", waiting on the server at most `wait` (zero: \
             one attempt); [`crate::Error::NotAcquired`] with the PTTL of the \
             hold in the way (a multi-lock's: the largest) if it is still \
             held then."
        )]
        pub $($async)? fn $try_acquire(
            &self,
            wait: std::time::Duration,
        ) -> $crate::error::Result<Guard> {
            let wait = $crate::command::Wait::of(wait);
            self.0.acquire(&self.0.targeted($kind), wait)$(.$await)?
        }
    };
}

/// A guard's accessors and the first step of its release, for a `Guard`
/// (blocking or async) with the fields `hold`, `released` and `watchdog`
/// (an `Option<$watchdog>`).
macro_rules! guard_calls {
    ($watchdog:ident) => {
        /// The fencing token a fenced acquisition took.
        pub fn token(&self) -> Option<i64> {
            self.hold.token
        }

        /// The owner holding it.
        pub fn owner(&self) -> &str {
            &self.hold.owner
        }

        /// True once the watchdog found the hold gone (its lease ran out,
        /// or it was forced open or deleted): whatever it protected is no
        /// longer protected. Always false without a watchdog.
        pub fn is_lost(&self) -> bool {
            self.watchdog.as_ref().is_some_and($watchdog::is_lost)
        }

        /// Stops the watchdog; whether it had found the hold gone (then it
        /// is not held, whatever the release replies).
        /// [`crate::Error::NotHeld`] when it was released already (what a
        /// drop after a release finds).
        fn stop_watching(&mut self) -> $crate::error::Result<bool> {
            let lost = self.is_lost();
            if let Some(mut w) = self.watchdog.take() {
                w.stop();
            }
            if std::mem::replace(&mut self.released, true) {
                return Err($crate::error::Error::NotHeld);
            }
            Ok(lost)
        }
    };
}

/// A RedLock's builders (blocking or async), for the type `$redlock`, whose
/// `spec` field is its `redlock::Spec`.
macro_rules! redlock_builders {
    ($redlock:ident) => {
        /// The lease each master grants.
        pub fn with_lease(mut self, lease: std::time::Duration) -> $redlock {
            self.spec.lease = lease;
            self
        }

        /// How long connecting to a master and its reply (besides its wait)
        /// may take before it counts as not granting (default 500 ms).
        pub fn with_timeout(mut self, timeout: std::time::Duration) -> $redlock {
            self.spec.timeout = timeout;
            self
        }
    };
}

pub(crate) use client_builders;
pub(crate) use guard_calls;
pub(crate) use hold_calls;
pub(crate) use lock_builders;
pub(crate) use multi_builders;
pub(crate) use redlock_builders;
