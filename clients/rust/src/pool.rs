//! The connections a client reuses: an acquisition or a release borrows an
//! idle connection to its server and gives it back once its replies came,
//! so a cycle opens no connection (opening one is a TCP handshake and the
//! `redis` crate's `CLIENT SETINFO`: more than the lock's own commands).
//! Each borrowed connection is used by one call at a time, so a `BLOCK`
//! parks only its own caller; one that failed, timed out or was dropped
//! mid-call (a cancelled wait, whose closing takes the waiter off the
//! server) is never given back.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use redis::aio::MultiplexedConnection;
use redis::Connection;

/// Idle connections kept per server; more are closed when given back (the
/// most calls a client had under way at once, up to this, stay open).
const IDLE: usize = 64;

/// Something kept per server, by its address, shared by the clones: a
/// client's idle connections ([`Pool`]) or its shared ones ([`Shared`]).
pub(crate) struct ByServer<V>(Arc<Mutex<HashMap<String, V>>>);

/// Idle connections by server address.
pub(crate) type Pool<C> = ByServer<Vec<C>>;

/// One connection per server that every call never waiting on the server
/// shares (the async client's tries and releases): the `redis` crate
/// pipelines concurrent calls on one multiplexed connection, so the server
/// reads and answers several calls at once, where a connection each costs
/// it a read and a write per call.
pub(crate) type Shared<C> = ByServer<C>;

// Written out rather than derived: a derive would ask `V: Clone`
// (`Default`), which connections need not be.
impl<V> Clone for ByServer<V> {
    fn clone(&self) -> Self {
        ByServer(Arc::clone(&self.0))
    }
}

impl<V> Default for ByServer<V> {
    fn default() -> Self {
        ByServer(Arc::default())
    }
}

/// The key a server's connections are kept under: its address (a client's
/// servers share the rest of their settings: the seed's).
pub(crate) fn server(client: &redis::Client) -> String {
    client.get_connection_info().addr().to_string()
}

impl<V> ByServer<V> {
    fn map(&self) -> MutexGuard<'_, HashMap<String, V>> {
        // A panic elsewhere leaves the map as consistent as before it.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Closes what is kept for `client`'s server: a connection to it
    /// failed, so the others (as old, or older) are suspect too (a
    /// restarted or failed over server closed them all); a shared one is
    /// made again by the next call.
    pub fn clear(&self, client: &redis::Client) {
        self.map().remove(&server(client));
    }
}

impl<C> Pool<C> {
    /// An idle connection to `client`'s server, the latest given back.
    pub fn take(&self, client: &redis::Client) -> Option<C> {
        self.map().get_mut(&server(client))?.pop()
    }

    /// Gives back a connection to `client`'s server whose calls all
    /// returned their replies.
    pub fn give_back(&self, client: &redis::Client, conn: C) {
        let mut map = self.map();
        let idle = map.entry(server(client)).or_default();
        if idle.len() < IDLE {
            idle.push(conn);
        }
    }

    /// The idle connections kept for `client`'s server, for the tests.
    #[cfg(test)]
    pub fn idle(&self, client: &redis::Client) -> usize {
        self.map().get(&server(client)).map_or(0, Vec::len)
    }
}

impl<C: Clone> Shared<C> {
    /// The shared connection to `client`'s server, if one was made.
    pub fn get(&self, client: &redis::Client) -> Option<C> {
        self.map().get(&server(client)).cloned()
    }

    /// `conn` is the shared connection to `client`'s server from now on.
    pub fn set(&self, client: &redis::Client, conn: C) {
        self.map().insert(server(client), conn);
    }
}

/// A client's connections: the blocking client's idle ones, or the async
/// one's idle and shared ones (each client uses its own).
#[derive(Clone, Default)]
pub(crate) struct Pools {
    pub blocking: Pool<Connection>,
    pub multiplexed: Pool<MultiplexedConnection>,
    pub shared: Shared<MultiplexedConnection>,
}

impl Pools {
    /// Closes the async client's idle and shared connections to `client`'s
    /// server: one of them failed.
    pub fn forget_multiplexed(&self, client: &redis::Client) {
        self.multiplexed.clear(client);
        self.shared.clear(client);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn connections_come_back_per_server_latest_first_and_go_on_clear() {
        let pool: Pool<u32> = Pool::default();
        let a = redis::Client::open("redis://127.0.0.1:1/").expect("url");
        let b = redis::Client::open("redis://127.0.0.1:2/").expect("url");
        assert_eq!(pool.take(&a), None);
        pool.give_back(&a, 1);
        pool.give_back(&a, 2);
        pool.give_back(&b, 3);
        assert_eq!(pool.take(&a), Some(2));
        pool.clear(&a);
        assert_eq!(pool.take(&a), None);
        assert_eq!(pool.idle(&b), 1, "another server's are kept");
        for n in 0..(IDLE as u32 + 5) {
            pool.give_back(&a, n);
        }
        assert_eq!(pool.idle(&a), IDLE, "no more than IDLE idle");
    }

    #[test]
    fn a_shared_connection_is_lent_until_forgotten() {
        let shared: Shared<u32> = Shared::default();
        let a = redis::Client::open("redis://127.0.0.1:1/").expect("url");
        assert_eq!(shared.get(&a), None);
        shared.set(&a, 7);
        assert_eq!((shared.get(&a), shared.get(&a)), (Some(7), Some(7)));
        shared.clear(&a);
        assert_eq!(shared.get(&a), None);
    }
}
