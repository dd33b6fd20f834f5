//! The watchdog: while a guard taken without a lease lives, it renews the
//! hold every third of the lease, as Redisson's does, and stops when told
//! the hold is gone (the renewal replies 0: the lease ran out, or the lock
//! was forced open or deleted), then marks it lost and calls the lock's
//! `on_lost` callback. A thread for the blocking client, a tokio task for
//! the async one.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, Sender};
use std::sync::Arc;
use std::thread::{self, JoinHandle};
use std::time::Duration;

use crate::command::{is_io, Target};

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

/// What a watchdog renews, and how often.
pub(crate) struct Renewal {
    pub target: Target,
    pub owner: String,
    pub lease_ms: u64,
    pub response_timeout: Option<Duration>,
    pub on_lost: Option<OnLost>,
}

impl Renewal {
    fn period(&self) -> Duration {
        Duration::from_millis((self.lease_ms / 3).max(1))
    }

    fn cmd(&self) -> redis::Cmd {
        self.target.renew(&self.owner, self.lease_ms)
    }

    /// Marks the hold lost, then tells the lock's callback.
    fn lost(&self, flag: &AtomicBool) {
        flag.store(true, Ordering::SeqCst);
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
    fn of(reply: redis::RedisResult<redis::Value>) -> Turn {
        match reply {
            Err(e) if is_io(&e) => Turn::Reconnect,
            Ok(r) if Target::renewed(&r).unwrap_or(false) => Turn::Held,
            _ => Turn::Lost,
        }
    }
}

/// A thread renewing one hold.
pub(crate) struct Watchdog {
    stop: Option<Sender<()>>,
    thread: Option<JoinHandle<()>>,
    lost: Arc<AtomicBool>,
}

impl Watchdog {
    pub fn start(client: redis::Client, renewal: Renewal) -> Watchdog {
        let (stop, stopped) = mpsc::channel::<()>();
        let lost = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&lost);
        let thread = thread::spawn(move || {
            let mut conn: Option<redis::Connection> = None;
            while let Err(RecvTimeoutError::Timeout) = stopped.recv_timeout(renewal.period()) {
                // A connection that failed is replaced at the next turn; the
                // hold is given up only when the server says it is gone.
                if conn.is_none() {
                    conn = crate::connection::connect(&client, renewal.response_timeout).ok();
                }
                let Some(c) = conn.as_mut() else { continue };
                match Turn::of(renewal.cmd().query(c)) {
                    Turn::Held => {}
                    Turn::Reconnect => conn = None,
                    Turn::Lost => return renewal.lost(&flag),
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
    pub fn start(client: redis::Client, renewal: Renewal) -> AsyncWatchdog {
        let (stop, mut stopped) = tokio::sync::oneshot::channel::<()>();
        let lost = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&lost);
        let task = tokio::spawn(async move {
            let mut conn: Option<redis::aio::MultiplexedConnection> = None;
            // The timeout elapsing is the turn to renew; the channel
            // resolving (a send or the guard dropping it) is the stop.
            while tokio::time::timeout(renewal.period(), &mut stopped)
                .await
                .is_err()
            {
                if conn.is_none() {
                    let config = redis::AsyncConnectionConfig::new()
                        .set_response_timeout(renewal.response_timeout);
                    conn = client
                        .get_multiplexed_async_connection_with_config(&config)
                        .await
                        .ok();
                }
                let Some(c) = conn.as_mut() else { continue };
                match Turn::of(renewal.cmd().query_async(c).await) {
                    Turn::Held => {}
                    Turn::Reconnect => conn = None,
                    Turn::Lost => return renewal.lost(&flag),
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
