//! Where a lock lives: one server, the master Sentinel names, or the master
//! of its hash slot in a Redis Cluster. A cluster is reached from one seed node; an acquisition
//! sent to the wrong master is redirected (`MOVED`, or `ASK` while its slot
//! migrates) and the master that answers for the slot is remembered. Once a
//! lock is taken, everything about it (the replica check, the watchdog,
//! the release) goes to that master.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use redis::ConnectionAddr;

use crate::error::{Error, Result};
use crate::sentinel::{Followed, Place, Sentinels};

/// Redirections an acquisition follows before giving up.
const MAX_REDIRECTS: usize = 5;

/// A lock's server.
#[derive(Clone)]
pub(crate) enum Endpoint {
    Server(redis::Client),
    /// The master of the moment of a deployment Sentinel watches.
    Sentinel(Arc<Followed>),
    Cluster(Arc<Nodes>),
}

/// A cluster's seed and the masters known per hash slot.
pub(crate) struct Nodes {
    seed: redis::Client,
    by_slot: Mutex<HashMap<u16, redis::Client>>,
}

/// Where to send a command after a redirection, and whether it needs
/// `ASKING` first.
pub(crate) struct Redirect {
    pub client: redis::Client,
    pub asking: bool,
}

impl Endpoint {
    /// The deployment `sentinels` watch, whose master was just found to be
    /// `master`.
    pub fn sentinel(sentinels: Sentinels, master: redis::Client) -> Endpoint {
        Endpoint::Sentinel(Arc::new(Followed::new(sentinels, master)))
    }

    pub fn cluster(seed: redis::Client) -> Endpoint {
        Endpoint::Cluster(Arc::new(Nodes {
            seed,
            by_slot: Mutex::new(HashMap::new()),
        }))
    }

    /// The server the lock `name` is first asked on.
    pub fn node(&self, name: &str) -> redis::Client {
        match self {
            Endpoint::Server(client) => client.clone(),
            Endpoint::Sentinel(followed) => followed.master(),
            Endpoint::Cluster(nodes) => nodes
                .by_slot
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .get(&slot(name))
                .cloned()
                .unwrap_or_else(|| nodes.seed.clone()),
        }
    }

    /// The key what was learned of `master`'s replicas is kept under. In
    /// a cluster, the master's address: each slot's master has replicas of
    /// its own. Otherwise the deployment's, the same for every master the
    /// client is pointed at ([`Endpoint::Server`] after a failover) or
    /// follows ([`Endpoint::Sentinel`]): a
    /// replica promoted in a failover is expected to be acknowledged by as
    /// many replicas as the master before it, whatever it says of itself
    /// (a node just promoted, or a returning old master, says fewer; kept
    /// per master, each had learned only its own count, and a promoted
    /// node's acquisitions were acknowledged by a replica about to resync
    /// from another: docs/safety.md, seed 12).
    pub fn learned_key(&self, master: &redis::Client) -> String {
        match self {
            Endpoint::Server(_) | Endpoint::Sentinel(_) => String::new(),
            Endpoint::Cluster(_) => master.get_connection_info().addr().to_string(),
        }
    }

    /// The deployment followed through Sentinel, if any.
    pub fn followed(&self) -> Option<&Followed> {
        match self {
            Endpoint::Sentinel(followed) => Some(followed),
            _ => None,
        }
    }

    /// A call failed with `e`: a followed deployment's Sentinels are asked
    /// again before the next call when `e` is what a master that moved
    /// gives (see [`Followed::failed`]).
    pub fn failed(&self, e: &Error) {
        if let Endpoint::Sentinel(followed) = self {
            followed.failed(e);
        }
    }

    /// Where a hold granted on `client` is renewed and released: the master
    /// of the moment when followed through Sentinel, else `client`.
    pub fn place(&self, client: redis::Client) -> Place {
        match self {
            Endpoint::Sentinel(followed) => Place::Followed(Arc::clone(followed)),
            _ => Place::Fixed(client),
        }
    }

    /// False when the master of `name`'s slot is not known yet (a cluster
    /// whose slot no reply named so far: the seed is asked, and may
    /// redirect).
    pub fn knows(&self, name: &str) -> bool {
        match self {
            Endpoint::Server(_) | Endpoint::Sentinel(_) => true,
            Endpoint::Cluster(nodes) => nodes
                .by_slot
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .contains_key(&slot(name)),
        }
    }

    /// Where `e` redirects a command about `name`, if it is a redirection
    /// (a standalone server never sends one).
    pub fn redirect(&self, name: &str, e: &redis::RedisError) -> Result<Option<Redirect>> {
        // `MOVED <slot> <host>:<port>`; an empty host is the host the
        // command was sent to, which is the seed's. Only a cluster
        // redirects.
        let (Endpoint::Cluster(nodes), Some((addr, _slot))) = (self, e.redirect_node()) else {
            return Ok(None);
        };
        let Some((host, port)) = addr
            .rsplit_once(':')
            .and_then(|(host, port)| Some((host, port.parse::<u16>().ok()?)))
        else {
            return Err(Error::UnexpectedReply(e.to_string()));
        };
        let asking = e.kind() == redis::ErrorKind::Server(redis::ServerErrorKind::Ask);
        let client = node_client(&nodes.seed, host, port)?;
        if !asking {
            nodes
                .by_slot
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .insert(slot(name), client.clone());
        }
        Ok(Some(Redirect { client, asking }))
    }
}

/// The node an acquisition is sent to, followed through the cluster's
/// redirections up to [`MAX_REDIRECTS`].
pub(crate) struct Route {
    pub client: redis::Client,
    /// The next attempt sends `ASKING` first.
    pub asking: bool,
    redirects: usize,
}

impl Route {
    /// The server the lock `name` is first asked on.
    pub fn start(endpoint: &Endpoint, name: &str) -> Route {
        Route {
            client: endpoint.node(name),
            asking: false,
            redirects: 0,
        }
    }

    /// Moves to where `e` redirects the command about `name`; `e` itself
    /// when it is no redirection or too many were followed.
    pub fn follow(&mut self, endpoint: &Endpoint, name: &str, e: redis::RedisError) -> Result<()> {
        match endpoint.redirect(name, &e)? {
            Some(to) if self.redirects < MAX_REDIRECTS => {
                (self.client, self.asking) = (to.client, to.asking);
                self.redirects += 1;
                Ok(())
            }
            _ => Err(e.into()),
        }
    }
}

/// A client for the node `host:port` with the seed's other settings
/// (database, user, password, protocol).
fn node_client(seed: &redis::Client, host: &str, port: u16) -> Result<redis::Client> {
    let info = seed.get_connection_info().clone();
    let ConnectionAddr::Tcp(seed_host, _) = info.addr() else {
        return Err(Error::InvalidArgument(
            "a cluster's seed must be a plain TCP address",
        ));
    };
    let host = if host.is_empty() {
        seed_host.clone()
    } else {
        host.to_string()
    };
    Ok(redis::Client::open(
        info.set_addr(ConnectionAddr::Tcp(host, port)),
    )?)
}

/// The hash slot of a key: CRC16 (XModem) of its hash tag, or of the whole
/// key when it has none, modulo 16384.
pub(crate) fn slot(key: &str) -> u16 {
    let bytes = key.as_bytes();
    let tagged = bytes
        .iter()
        .position(|&b| b == b'{')
        .and_then(|open| {
            let rest = &bytes[open + 1..];
            rest.iter()
                .position(|&b| b == b'}')
                .filter(|&close| close > 0)
                .map(|close| &rest[..close])
        })
        .unwrap_or(bytes);
    crc16(tagged) % 16_384
}

fn crc16(bytes: &[u8]) -> u16 {
    let mut crc: u16 = 0;
    for &b in bytes {
        crc ^= u16::from(b) << 8;
        for _ in 0..8 {
            crc = if crc & 0x8000 != 0 {
                (crc << 1) ^ 0x1021
            } else {
                crc << 1
            };
        }
    }
    crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slots_as_redis_computes_them() {
        // CLUSTER KEYSLOT on Redis 7.0.
        assert_eq!(slot("foo"), 12182);
        assert_eq!(slot("orders"), slot("{orders}:1"));
        assert_eq!(slot("{user1000}.following"), slot("{user1000}.followers"));
        assert_ne!(
            slot("foo{}{bar}"),
            slot("bar"),
            "an empty tag hashes the whole key"
        );
        assert_eq!(crc16(b"123456789"), 0x31C3, "the XModem check value");
    }
}
