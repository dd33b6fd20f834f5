//! The methods the blocking and the async types share, written once (as
//! the `redis` crate writes its commands once for its connection types):
//! a client's (`client_builders!`: its constructors but the Sentinel's,
//! its settings and the lock makers), a lock handle's builders
//! (`lock_builders!`, a multi-lock's `multi_builders!`) and its calls
//! (`hold_calls!`, blocking or `async`), a semaphore's and a
//! permit-expirable semaphore's calls (`semaphore_calls!`,
//! `permit_calls!`, sharing `take_calls!` and `count_calls!`), a latch's
//! (`latch_calls!`), a guard's accessors (`guard_calls!`) and a RedLock's
//! builders (`redlock_builders!`). Each
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

        /// The semaphore `name` (Redisson's `getSemaphore`, `RSemaphore`,
        /// `SEMAPHORE.*`): its count of free permits is the key `name`,
        /// shared with Redisson's clients. Permits have no owner: anyone
        /// may give them back.
        pub fn semaphore(&self, name: &str) -> Semaphore {
            Semaphore(
                self.handle($crate::command::Target::semaphore(name))
                    .with_owner(""),
            )
        }

        /// The permit-expirable semaphore `name` (Redisson's
        /// `getPermitExpirableSemaphore`, `RPermitExpirableSemaphore`,
        /// `PERMIT.*`): its free count is the key `name` and its permits
        /// taken the sorted set `{name}:timeout` of id to expiry, shared
        /// with Redisson's clients. Each permit taken is an id with a lease
        /// of its own (the watchdog's by default, renewed by it).
        pub fn permit_expirable_semaphore(&self, name: &str) -> PermitExpirableSemaphore {
            PermitExpirableSemaphore(
                self.handle($crate::command::Target::permit_semaphore(name))
                    .with_owner(""),
            )
        }

        /// The count-down latch `name` (Redisson's `getCountDownLatch`,
        /// `RCountDownLatch`, `LATCH.*`): its count is the key `name`,
        /// shared with Redisson's clients.
        pub fn count_down_latch(&self, name: &str) -> CountDownLatch {
            CountDownLatch(self.handle($crate::command::Target::single(
                $crate::command::Kind::Lock,
                name,
            )))
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

/// A semaphore's calls and its guard of permits, for the types `Semaphore`
/// (a tuple struct over the client's handle) and `Permits` (written here:
/// `$guard`, the client's `Guard`, inside), blocking or futures with
/// `async await` at the end.
macro_rules! semaphore_calls {
    ($guard:ident $(, $async:tt $await:tt)?) => {
        impl Semaphore {
            $crate::builders::take_calls!(
                Permits, |guard, permits| Permits { guard, permits },
                "Takes `permits` (1 or more), waiting on the server as long as it \
                 takes (Redisson's `acquire(n)`: `BLOCK 0`), in arrival order \
                 behind the clients waiting already: a wait for many is never \
                 passed by takers of few. [`crate::Error::NotAcquired`] only when \
                 the server ended the wait (`CLIENT UNBLOCK`).",
                "Takes `permits` (1 or more), waiting on the server at most `wait` \
                 (zero: one attempt, refused while others wait); `None` when they \
                 were not free in time (Redisson's `tryAcquire(n, wait)`)."
                $(, $async $await)?
            );

            /// Gives `permits` (1 or more) back without a guard (Redisson's
            /// `release(n)`; anyone may), serving the waiters they cover. A
            /// lost reply is sent again once with the same request id, so
            /// they are given back once.
            pub $($async)? fn release(&self, permits: u64) -> $crate::error::Result<()> {
                self.0.unlock(&self.0.target.taking(permits))$(.$await)?
            }

            /// [`Semaphore::try_set_permits`] for a semaphore that lives
            /// `ttl` (Redisson's `trySetPermits(n, ttl)`).
            pub $($async)? fn try_set_permits_for(
                &self,
                permits: i64,
                ttl: std::time::Duration,
            ) -> $crate::error::Result<bool> {
                let cmd = $crate::command::try_set_permits(&self.0.target, permits, Some(ttl));
                $crate::command::flag(self.0.call(&cmd, false)$(.$await)??)
            }

            /// Takes every free permit; how many there were (Redisson's
            /// `drainPermits`).
            pub $($async)? fn drain_permits(&self) -> $crate::error::Result<i64> {
                let cmd = $crate::command::on("SEMAPHORE.DRAIN", self.name());
                $crate::command::integer(self.0.call(&cmd, false)$(.$await)??)
            }

            $crate::builders::count_calls!($($async $await)?);
        }

        /// Permits taken from a [`Semaphore`], given back when dropped (or
        /// by [`Permits::release`]) with a request id, and with the
        /// acquisition's latches deleted in the same round trip. Permits
        /// have no lease, as Redisson's: a release that fails (the server
        /// unreachable twice) leaves them taken until
        /// [`Semaphore::release`] or [`Semaphore::add_permits`] gives them
        /// back, as does an async guard dropped outside a tokio runtime,
        /// where nothing can be sent.
        pub struct Permits {
            guard: $guard,
            permits: u64,
        }

        impl Permits {
            /// How many permits it holds.
            pub fn permits(&self) -> u64 {
                self.permits
            }

            /// Gives the permits back now.
            pub $($async)? fn release(self) -> $crate::error::Result<()> {
                self.guard.release()$(.$await)?
            }

            /// Keeps the permits taken: dropped, it gives nothing back
            /// (Redisson's style, where `release(n)` is a call of its own:
            /// [`Semaphore::release`]).
            pub fn forget(self) {
                self.guard.forget();
            }
        }

        impl std::fmt::Debug for Permits {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct("Permits")
                    .field("permits", &self.permits)
                    .finish_non_exhaustive()
            }
        }
    };
}

/// A semaphore's two acquisitions (`acquire`, `try_acquire`) of `permits`
/// through the locks' driver, returning `$taken` as `$make` builds it from
/// the `$guard` and the `$permits` taken, with the docs given, inside its
/// `impl`, blocking or futures with `async await` at the end.
macro_rules! take_calls {
    (
        $taken:ident, |$guard:ident, $permits:ident| $make:expr,
        $acquire_doc:literal, $try_doc:literal $(, $async:tt $await:tt)?
    ) => {
        #[doc = $acquire_doc]
        pub $($async)? fn acquire(&self, $permits: u64) -> $crate::error::Result<$taken> {
            let forever = $crate::command::Wait::Forever;
            let target = self.0.target.taking($permits);
            let $guard = self.0.acquire(&target, forever)$(.$await)??;
            Ok($make)
        }

        #[doc = $try_doc]
        pub $($async)? fn try_acquire(
            &self,
            $permits: u64,
            wait: std::time::Duration,
        ) -> $crate::error::Result<Option<$taken>> {
            let wait = $crate::command::Wait::of(wait);
            let target = self.0.target.taking($permits);
            match self.0.acquire(&target, wait)$(.$await)? {
                Ok($guard) => Ok(Some($make)),
                Err($crate::error::Error::NotAcquired { .. }) => Ok(None),
                Err(e) => Err(e),
            }
        }
    };
}

/// The calls a semaphore and a permit-expirable semaphore share, on their
/// count (`SEMAPHORE.*` or `PERMIT.*`, as the handle's target says), inside
/// their `impl`, blocking or futures with `async await` at the end.
macro_rules! count_calls {
    ($($async:tt $await:tt)?) => {
        /// The semaphore's name (the key of its count).
        pub fn name(&self) -> &str {
            self.0.name()
        }

        /// Sets the count to `permits` when the semaphore has none
        /// (Redisson's `trySetPermits`); false when it has one.
        pub $($async)? fn try_set_permits(&self, permits: i64) -> $crate::error::Result<bool> {
            let cmd = $crate::command::try_set_permits(&self.0.target, permits, None);
            $crate::command::flag(self.0.call(&cmd, false)$(.$await)??)
        }

        /// Adds `permits` to the count (negative: takes them away, the
        /// count may go below zero), serving the waiters they cover
        /// (Redisson's `addPermits`).
        pub $($async)? fn add_permits(&self, permits: i64) -> $crate::error::Result<()> {
            let cmd = $crate::command::with_permits(&self.0.target, "ADDPERMITS", permits);
            $crate::command::nil(self.0.call(&cmd, false)$(.$await)??)
        }

        /// The free permits, 0 without a semaphore (Redisson's
        /// `availablePermits`).
        pub $($async)? fn available_permits(&self) -> $crate::error::Result<i64> {
            self.count("AVAILABLE")$(.$await)?
        }

        /// The integer reply of the count's command `verb`, which changes
        /// nothing a resend could change again.
        $($async)? fn count(&self, verb: &str) -> $crate::error::Result<i64> {
            let cmd = $crate::command::on(&self.0.target.family(verb), self.name());
            $crate::command::integer(self.0.call(&cmd, true)$(.$await)??)
        }
    };
}

/// A permit-expirable semaphore's calls and its guard of permits, for the
/// types `PermitExpirableSemaphore` (a tuple struct over the client's
/// handle) and `LeasedPermits` (written here: `$guard`, the client's
/// `Guard`, inside), blocking or futures with `async await` at the end.
macro_rules! permit_calls {
    ($guard:ident, $watchdog:literal $(, $async:tt $await:tt)?) => {
        impl PermitExpirableSemaphore {
            $crate::builders::count_calls!($($async $await)?);

            /// Permits leased for `lease` each, with no watchdog (Redisson's
            /// `acquire(n, lease, unit)`). Without it (and without
            /// [`PermitExpirableSemaphore::never_expiring`]) they are leased
            /// for the watchdog timeout and renewed every third of it
            /// (`PERMIT.UPDATELEASE`) until released.
            pub fn with_lease(self, lease: std::time::Duration) -> PermitExpirableSemaphore {
                PermitExpirableSemaphore(self.0.with_lease(lease))
            }

            /// Permits that never expire (lease -1, what Redisson's
            /// `acquire()` takes), with no watchdog: only a release gives
            /// them back.
            pub fn never_expiring(self) -> PermitExpirableSemaphore {
                PermitExpirableSemaphore(self.0.never_expiring())
            }

            #[doc = concat!(
                "Calls `on_lost`, on ",
                $watchdog,
                ", when the watchdog renewing permits of this semaphore finds \
                 one gone (its lease ran out, or it was released by id \
                 elsewhere): what they protected is no longer protected."
            )]
            pub fn on_lost(
                self,
                on_lost: impl Fn(&$crate::watchdog::LostHold) + Send + Sync + 'static,
            ) -> PermitExpirableSemaphore {
                PermitExpirableSemaphore(self.0.on_lost(on_lost))
            }

            $crate::builders::take_calls!(
                LeasedPermits,
                |guard, permits| LeasedPermits { guard },
                "Takes `permits` (1 or more), each an id with its own lease, \
                 waiting on the server as long as it takes, in arrival order \
                 (Redisson's `acquire(n)`: `BLOCK 0`). A lost reply is sent again \
                 once with the same request id: the server replies the same ids \
                 and takes nothing more. [`crate::Error::NotAcquired`] only when \
                 the server ended the wait (`CLIENT UNBLOCK`).",
                "Takes `permits` (1 or more), waiting on the server at most `wait` \
                 (zero: one attempt, refused while others wait); `None` when they \
                 were not free in time (Redisson's `tryAcquire(n, wait, lease, \
                 unit)`). Permits expiring meanwhile come back and serve the wait \
                 when they expire."
                $(, $async $await)?
            );

            /// Releases the permits `ids` without a guard, all or none
            /// (Redisson's `release(ids)`); [`crate::Error::NotHeld`] when
            /// one is not held or has expired (then none was released). A
            /// lost reply is raised, never sent again: a resend could not
            /// tell its own release from an expiry.
            pub $($async)? fn release<S: AsRef<str>>(&self, ids: &[S]) -> $crate::error::Result<()> {
                let ids: Vec<String> = ids.iter().map(|id| id.as_ref().to_string()).collect();
                if ids.is_empty() {
                    return Err($crate::error::Error::InvalidArgument("no permit id to release"));
                }
                let cmd = $crate::command::release_ids(self.name(), &ids);
                self.0.target.released(&self.0.call(&cmd, false)$(.$await)??)
            }

            /// Releases the permit `id` (Redisson's `tryRelease(id)`): false
            /// when it is not held, or its lease had run out (it is back all
            /// the same).
            pub $($async)? fn try_release(&self, id: &str) -> $crate::error::Result<bool> {
                let cmd = $crate::command::on_id("PERMIT.TRYRELEASE", self.name(), id);
                $crate::command::flag(self.0.call(&cmd, false)$(.$await)??)
            }

            /// Gives the held permit `id` a new lease from now, `None`: it
            /// never expires (Redisson's `updateLeaseTime`); false when it
            /// is not held.
            pub $($async)? fn update_lease_time(
                &self,
                id: &str,
                lease: Option<std::time::Duration>,
            ) -> $crate::error::Result<bool> {
                let cmd = $crate::command::update_lease(self.name(), id, lease);
                $crate::command::flag(self.0.call(&cmd, true)$(.$await)??)
            }

            /// What is left of the permit `id`'s lease, `None` when it never
            /// expires (Redisson's `getLeaseTime`);
            /// [`crate::Error::NotHeld`] when it is not held.
            pub $($async)? fn lease_time(
                &self,
                id: &str,
            ) -> $crate::error::Result<Option<std::time::Duration>> {
                let cmd = $crate::command::on_id("PERMIT.LEASETIME", self.name(), id);
                match $crate::command::integer(self.0.call(&cmd, true)$(.$await)??)? {
                    -1 => Ok(None),
                    0 => Err($crate::error::Error::NotHeld),
                    ms => Ok(Some(std::time::Duration::from_millis(ms.unsigned_abs()))),
                }
            }

            /// Makes free plus taken permits `permits` (Redisson's
            /// `setPermits`), serving the waiters it frees.
            pub $($async)? fn set_permits(&self, permits: i64) -> $crate::error::Result<()> {
                let cmd = $crate::command::with_permits(&self.0.target, "SETPERMITS", permits);
                $crate::command::nil(self.0.call(&cmd, false)$(.$await)??)
            }

            /// The permits taken (Redisson's `acquiredPermits`), expired
            /// ones reclaimed first.
            pub $($async)? fn acquired_permits(&self) -> $crate::error::Result<i64> {
                self.count("ACQUIRED")$(.$await)?
            }

            /// Free plus taken permits, 0 without a semaphore (Redisson's
            /// `getPermits`).
            pub $($async)? fn permits(&self) -> $crate::error::Result<i64> {
                self.count("PERMITS")$(.$await)?
            }
        }

        /// Permits taken from a [`PermitExpirableSemaphore`]: their ids,
        /// released all at once when dropped (or by
        /// [`LeasedPermits::release`]), with the acquisition's latches
        /// deleted in the same round trip; renewed meanwhile by the
        /// watchdog when taken without a lease. A release that fails leaves
        /// them taken until their lease ends (never-expiring ones: until
        /// [`PermitExpirableSemaphore::release`] gives them back), as does
        /// an async guard dropped outside a tokio runtime.
        pub struct LeasedPermits {
            guard: $guard,
        }

        impl LeasedPermits {
            /// The permits' ids (32 hex digits each), as Redisson's are.
            pub fn ids(&self) -> &[String] {
                self.guard.ids()
            }

            /// True once the watchdog found one of them gone (its lease ran
            /// out, or it was released by id elsewhere). Always false
            /// without a watchdog.
            pub fn is_lost(&self) -> bool {
                self.guard.is_lost()
            }

            /// Releases them now, all or none: [`crate::Error::NotHeld`]
            /// when one was no longer held (none was released).
            pub $($async)? fn release(self) -> $crate::error::Result<()> {
                self.guard.release()$(.$await)?
            }

            /// Keeps the permits taken and stops renewing them: dropped, it
            /// releases nothing (release them by id with
            /// [`PermitExpirableSemaphore::release`]).
            pub fn forget(self) {
                self.guard.forget();
            }
        }

        impl std::fmt::Debug for LeasedPermits {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.debug_struct("LeasedPermits")
                    .field("ids", &self.ids())
                    .finish_non_exhaustive()
            }
        }
    };
}

/// A count-down latch's calls, for the type `CountDownLatch` (a tuple
/// struct over the client's handle), blocking or futures with `async
/// await` at the end.
macro_rules! latch_calls {
    ($($async:tt $await:tt)?) => {
        /// The latch's name (the key of its count).
        pub fn name(&self) -> &str {
            self.0.name()
        }

        /// Sets the count when there is no latch (Redisson's
        /// `trySetCount`); false when there is one.
        pub $($async)? fn try_set_count(&self, count: u64) -> $crate::error::Result<bool> {
            let cmd = $crate::command::try_set_count(self.name(), count);
            $crate::command::flag(self.0.call(&cmd, false)$(.$await)??)
        }

        /// Counts down once (Redisson's `countDown`): at zero the latch is
        /// deleted and every waiter answered. Its lost reply is an error,
        /// never sent again (a second count-down would count twice).
        pub $($async)? fn count_down(&self) -> $crate::error::Result<()> {
            let cmd = $crate::command::on("LATCH.COUNTDOWN", self.name());
            $crate::command::nil(self.0.call(&cmd, false)$(.$await)??)
        }

        /// The count, 0 without a latch (Redisson's `getCount`).
        pub $($async)? fn count(&self) -> $crate::error::Result<i64> {
            let cmd = $crate::command::on("LATCH.COUNT", self.name());
            $crate::command::integer(self.0.call(&cmd, true)$(.$await)??)
        }

        /// Deletes the latch, answering its waiters (Redisson's `delete`);
        /// false when there was none.
        pub $($async)? fn delete(&self) -> $crate::error::Result<bool> {
            let cmd = $crate::command::on("LATCH.DELETE", self.name());
            $crate::command::flag(self.0.call(&cmd, false)$(.$await)??)
        }

        /// Waits on the server until the count reaches zero (Redisson's
        /// `await()`: `LATCH.AWAIT … BLOCK 0`), at once without a latch.
        /// [`crate::Error::NotAcquired`] only when the server ended the
        /// wait (`CLIENT UNBLOCK`).
        pub $($async)? fn wait(&self) -> $crate::error::Result<()> {
            if self.wait_for($crate::command::Wait::Forever)$(.$await)?? {
                Ok(())
            } else {
                Err($crate::error::Error::NotAcquired { pttl: 0 })
            }
        }

        /// Waits on the server at most `limit` (zero: one look) until the
        /// count reaches zero (Redisson's `await(timeout)`); false when it
        /// had not by then.
        pub $($async)? fn wait_timeout(
            &self,
            limit: std::time::Duration,
        ) -> $crate::error::Result<bool> {
            self.wait_for($crate::command::Wait::of(limit))$(.$await)?
        }

        /// `LATCH.AWAIT` waiting as `wait` says; a lost reply (it only
        /// reads) is asked again with what is left of the wait.
        $($async)? fn wait_for(&self, wait: $crate::command::Wait) -> $crate::error::Result<bool> {
            let name = self.name();
            let cmd = |w| $crate::command::await_zero(name, w);
            $crate::command::flag(self.0.wait_call(cmd, wait, true)$(.$await)??)
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

        /// A permit-expirable semaphore's permits' ids (none for a lock).
        pub(crate) fn ids(&self) -> &[String] {
            &self.hold.ids
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

        /// Keeps what it holds: dropped, it sends nothing (a semaphore's
        /// permits stay taken, for a release of their own).
        pub(crate) fn forget(mut self) {
            let _ = self.stop_watching();
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
pub(crate) use count_calls;
pub(crate) use guard_calls;
pub(crate) use hold_calls;
pub(crate) use latch_calls;
pub(crate) use lock_builders;
pub(crate) use multi_builders;
pub(crate) use permit_calls;
pub(crate) use redlock_builders;
pub(crate) use semaphore_calls;
pub(crate) use take_calls;
