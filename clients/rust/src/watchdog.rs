//! The watchdog: while a guard taken without a lease lives, it renews the
//! hold every third of the lease, as Redisson's does, and stops when told
//! the hold is gone (the renewal replies 0: the lease ran out, or the lock
//! was forced open or deleted), then marks it lost and calls the lock's
//! `on_lost` callback. A thread for the blocking client, a tokio task for
//! the async one. A hold followed through Sentinel is renewed on the
//! master of the moment (an acknowledged hold was replicated there); a
//! renewal that fails as one to a master that moved has the Sentinels
//! asked again before the next.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crate::command::{self, is_io, Target};
use crate::sentinel::{self, Place};

/// A hold a watchdog found gone, as its lock's `on_lost` callback is told.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LostHold {
    /// The lock's name (a multi-lock's: every name it holds).
    pub names: Vec<String>,
    /// The owner that held it.
    pub owner: String,
}

/// What a watchdog calls, on its thread or task, when it finds the hold
/// gone.
pub(crate) type OnLost = Arc<dyn Fn(&LostHold) + Send + Sync>;

/// The client's count of the owner's holds a watchdog renews (see
/// `handle::Holds`): a renewal finding the hold gone says the server's is 0,
/// unless the owner's own calls changed it since the renewal was sent.
pub(crate) trait HoldCount: Send + Sync {
    /// A mark of the count as it is before a renewal is sent; None when
    /// there is nothing to forget or a call of the owner's is under way.
    fn mark(&self) -> Option<u64>;
    /// The renewal sent after `mark` found the hold gone: the count is
    /// forgotten if nothing changed it since.
    fn gone(&self, mark: u64);
}

/// What a watchdog renews, and how often.
pub(crate) struct Renewal {
    pub target: Target,
    pub owner: String,
    /// A permit-expirable semaphore's permits: each id is renewed.
    pub ids: Vec<String>,
    pub lease_ms: u64,
    pub response_timeout: Option<Duration>,
    pub on_lost: Option<OnLost>,
    /// A single lock's: the client's count of it.
    pub count: Option<Arc<dyn HoldCount>>,
}

impl Renewal {
    fn period(&self) -> Duration {
        Duration::from_millis((self.lease_ms / 3).max(1))
    }

    /// A lock's renewal, or one `PERMIT.UPDATELEASE` per permit id: gone
    /// when any replies 0.
    fn cmd(&self) -> redis::Pipeline {
        let mut pipe = redis::pipe();
        if self.target.expiry.is_some() {
            let lease = Some(Duration::from_millis(self.lease_ms));
            for id in &self.ids {
                pipe.add_command(command::update_lease(self.target.name(), id, lease));
            }
        } else {
            pipe.add_command(self.target.renew(&self.owner, self.lease_ms));
        }
        pipe
    }

    /// The mark of the client's count before a renewal.
    fn mark(&self) -> Option<u64> {
        self.count.as_ref().and_then(|count| count.mark())
    }

    /// Marks the hold lost, forgets the client's count of it (as it was at
    /// `mark`), then tells the lock's callback.
    fn lost(&self, flag: &AtomicBool, mark: Option<u64>) {
        flag.store(true, Ordering::SeqCst);
        if let (Some(count), Some(mark)) = (&self.count, mark) {
            count.gone(mark);
        }
        if let Some(on_lost) = &self.on_lost {
            on_lost(&LostHold {
                names: self.target.holds.iter().map(|(_, n)| n.clone()).collect(),
                owner: self.owner.clone(),
            });
        }
    }
}

/// What a renewal's outcome tells the watchdog.
enum Turn {
    /// Renewed: go on.
    Held,
    /// The connection failed: try again on a new one at the next turn.
    Reconnect,
    /// 0, or an error reply (the lock's key replaced by a value of another
    /// type): the hold is gone.
    Lost,
}

impl Turn {
    /// A renewal's reply on `place`; followed through Sentinel, an error a
    /// master that moved gives (`READONLY` from the demoted node) is no
    /// word on the hold: the Sentinels are asked and the next turn renews
    /// on the master they name.
    fn of(reply: redis::RedisResult<redis::Value>, place: &Place) -> Turn {
        match (reply, place.followed()) {
            (Err(e), None) if is_io(&e) => Turn::Reconnect,
            (Err(e), Some(followed)) if sentinel::moved(&e) => {
                followed.suspect();
                Turn::Reconnect
            }
            (Ok(r), _) if Target::renewed(&r).unwrap_or(false) => Turn::Held,
            _ => Turn::Lost,
        }
    }
}

/// Renewals a turn sends at most: followed through Sentinel, one that met
/// a master that moved is sent again at once to the master the Sentinels
/// name then (the hold's lease runs on it meanwhile); otherwise one, and a
/// failed connection waits for the next turn.
fn tries(place: &Place) -> usize {
    if place.followed().is_some() {
        2
    } else {
        1
    }
}

/// A renewal's connection, and the address it was made to (followed
/// through Sentinel, one to a master that moved is replaced).
struct Renewing<C> {
    address: String,
    conn: C,
}

impl<C> Renewing<C> {
    /// True when `slot` holds no connection to `client`'s server: a turn
    /// makes one (the first, after a failure, or followed through Sentinel
    /// to a master that moved).
    fn missing(slot: &Option<Renewing<C>>, client: &redis::Client) -> bool {
        let address = sentinel::address(client);
        slot.as_ref().is_none_or(|r| r.address != address)
    }

    /// The connection a turn renews on: the one in `slot`, replaced by
    /// `made` (what connecting to `client` gave: None when it failed) when
    /// one was made.
    fn conn<'a, E>(
        slot: &'a mut Option<Renewing<C>>,
        client: &redis::Client,
        made: Option<std::result::Result<C, E>>,
    ) -> Option<&'a mut C> {
        if let Some(made) = made {
            *slot = made.ok().map(|conn| Renewing {
                address: sentinel::address(client),
                conn,
            });
        }
        slot.as_mut().map(|r| &mut r.conn)
    }
}

/// A thread renewing one hold.
pub(crate) struct Watchdog {
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
    lost: Arc<AtomicBool>,
}

impl Watchdog {
    pub fn start(place: Place, renewal: Renewal) -> Watchdog {
        let (stop, stopped) = mpsc::channel::<()>();
        let lost = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&lost);
        let thread = thread::spawn(move || {
            let mut conn: Option<Renewing<redis::Connection>> = None;
            while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(renewal.period()) {
                // A connection that failed is replaced at the next turn
                // (followed through Sentinel, at once on the master named
                // then); the hold is given up only when the server says it
                // is gone.
                for _ in 0..tries(&place) {
                    if let Some(followed) = place.followed() {
                        followed.refresh_blocking();
                    }
                    let client = place.client();
                    let made = Renewing::missing(&conn, &client)
                        .then(|| crate::connection::connect(&client, renewal.response_timeout));
                    let Some(c) = Renewing::conn(&mut conn, &client, made) else {
                        continue;
                    };
                    let mark = renewal.mark();
                    match Turn::of(renewal.cmd().query(c), &place) {
                        Turn::Held => break,
                        Turn::Reconnect => conn = None,
                        Turn::Lost => return renewal.lost(&flag, mark),
                    }
                }
            }
        });
        Watchdog {
            stop: Some(stop),
            thread: Some(thread),
            lost,
        }
    }

    /// True once a renewal found the hold gone.
    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    /// Stops renewing and waits for the thread to end.
    pub fn stop(&mut self) {
        self.stop.take();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.stop();
    }
}

/// A tokio task renewing one hold.
pub(crate) struct AsyncWatchdog {
    stop: Option<tokio::sync::oneshot::Sender<()>>,
    task: tokio::task::JoinHandle<()>,
    lost: Arc<AtomicBool>,
}

impl AsyncWatchdog {
    pub fn start(place: Place, renewal: Renewal) -> AsyncWatchdog {
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let lost = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&lost);
        let task = tokio::spawn(async move {
            let mut conn: Option<Renewing<redis::aio::MultiplexedConnection>> = None;
            // The timeout elapsing is the turn to renew; the channel
            // resolving (a send or the guard dropping it) is the stop.
            while tokio::time::timeout(renewal.period(), &mut stopped)
                .await
                .is_err()
            {
                for _ in 0..tries(&place) {
                    if let Some(followed) = place.followed() {
                        followed.refresh().await;
                    }
                    let client = place.client();
                    let made = if Renewing::missing(&conn, &client) {
                        let config = redis::AsyncConnectionConfig::new()
                            .set_response_timeout(renewal.response_timeout);
                        Some(
                            client
                                .get_multiplexed_async_connection_with_config(&config)
                                .await,
                        )
                    } else {
                        None
                    };
                    let Some(c) = Renewing::conn(&mut conn, &client, made) else {
                        continue;
                    };
                    let mark = renewal.mark();
                    match Turn::of(renewal.cmd().query_async(c).await, &place) {
                        Turn::Held => break,
                        Turn::Reconnect => conn = None,
                        Turn::Lost => return renewal.lost(&flag, mark),
                    }
                }
            }
        });
        AsyncWatchdog {
            stop: Some(stop),
            task,
            lost,
        }
    }

    pub fn is_lost(&self) -> bool {
        self.lost.load(Ordering::SeqCst)
    }

    /// Stops renewing: no renewal starts after this returns (one under way
    /// is cut short).
    pub fn stop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        self.task.abort();
    }
}

impl Drop for AsyncWatchdog {
    fn drop(&mut self) {
        self.stop();
    }
}
