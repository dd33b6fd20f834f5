//! Following the master of a deployment that Redis Sentinel watches: the
//! Sentinels are asked which node is the master (`SENTINEL
//! GET-MASTER-ADDR-BY-NAME`, then `ROLE` on that node, as the Sentinel
//! clients' guidelines say), once when the client is made and again after
//! a call failed the way a call to a master that moved fails; the client's
//! calls, renewals and releases go to the master of the moment.
//!
//! redis-rs's `sentinel` feature is not used: its `SentinelClient` asks the
//! Sentinels (and checks the role on a new connection) for every
//! connection it hands out, where this client reuses its connections; its
//! role check connects to the address a Sentinel announces, which a client
//! behind a proxy or a NAT cannot reach (there is no hook to map it); and
//! its connections to the Sentinels and to the named node wait without a
//! timeout, so a master paused past its failover would stall the lookup
//! until it ran again.

use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use redis::{
    AsyncConnectionConfig, ConnectionAddr, ConnectionInfo, IntoConnectionInfo, RedisConnectionInfo,
    Role,
};

use crate::command::is_io;
use crate::error::{Error, Result};

/// How long a connection to a Sentinel or to the node it names may take to
/// open and to answer, unless told ([`Sentinels::with_timeout`]): the
/// default response timeout of the client's own calls.
const TIMEOUT: Duration = Duration::from_secs(3);

/// How soon the Sentinels are asked again after the last time: calls that
/// fail together (every call in flight when the master went) ask once, and
/// a master that is down until Sentinel promotes another is not asked
/// about in a loop by every call.
const REASK: Duration = Duration::from_millis(100);

/// Maps the address a Sentinel announces to the one the client connects to.
type AddressMap = Arc<dyn Fn(&str, u16) -> (String, u16) + Send + Sync>;

/// The Sentinels of a deployment and the name they know its master by:
/// what [`crate::Client::sentinel`] and [`crate::aio::Client::sentinel`]
/// follow. The master is connected to with [`Sentinels::with_master_settings`]
/// (database, user, password, protocol: none by default), at the address
/// the Sentinels announce, mapped by [`Sentinels::with_address_map`] when
/// the client reaches the nodes some other way (a proxy, a NAT, a
/// container's published port), as Jedis's `HostAndPortMapper` or ioredis's
/// `natMap`. The master is reached over plain TCP.
#[derive(Clone)]
pub struct Sentinels {
    sentinels: Vec<ConnectionInfo>,
    master_name: String,
    master_settings: RedisConnectionInfo,
    map: Option<AddressMap>,
    timeout: Duration,
}

impl Sentinels {
    /// The Sentinels at `sentinels` (anything redis-rs connects to:
    /// `"redis://host:port"`, `("host", port)`, a `redis::ConnectionInfo`
    /// with the Sentinels' own password), asked in this order, watching
    /// the master named `master_name`. [`Error::InvalidArgument`] when
    /// there is none, [`Error::Redis`] when an address cannot be read.
    pub fn new<T: IntoConnectionInfo>(
        sentinels: impl IntoIterator<Item = T>,
        master_name: &str,
    ) -> Result<Sentinels> {
        let sentinels = sentinels
            .into_iter()
            .map(IntoConnectionInfo::into_connection_info)
            .collect::<redis::RedisResult<Vec<_>>>()?;
        if sentinels.is_empty() {
            return Err(Error::InvalidArgument("at least one Sentinel is needed"));
        }
        Ok(Sentinels {
            sentinels,
            master_name: master_name.to_string(),
            master_settings: RedisConnectionInfo::default(),
            map: None,
            timeout: TIMEOUT,
        })
    }

    /// Connects to the master with these settings (database, user,
    /// password, protocol), as redis-rs's `SentinelNodeConnectionInfo`.
    pub fn with_master_settings(mut self, settings: RedisConnectionInfo) -> Sentinels {
        self.master_settings = settings;
        self
    }

    /// Connects to `map(host, port)` where a Sentinel announces the master
    /// at `host:port`.
    pub fn with_address_map(
        mut self,
        map: impl Fn(&str, u16) -> (String, u16) + Send + Sync + 'static,
    ) -> Sentinels {
        self.map = Some(Arc::new(map));
        self
    }

    /// How long a connection to a Sentinel, or to the master it names for
    /// the role check, may take to open and to answer (3 s).
    pub fn with_timeout(mut self, timeout: Duration) -> Sentinels {
        self.timeout = timeout;
        self
    }

    /// `SENTINEL GET-MASTER-ADDR-BY-NAME <name>`.
    fn ask(&self) -> redis::Cmd {
        let mut cmd = redis::cmd("SENTINEL");
        cmd.arg("GET-MASTER-ADDR-BY-NAME").arg(&self.master_name);
        cmd
    }

    /// A client for the node a Sentinel announced at `host:port`.
    fn node(&self, host: &str, port: u16) -> redis::RedisResult<redis::Client> {
        let (host, port) = match &self.map {
            Some(map) => map(host, port),
            None => (host.to_string(), port),
        };
        let info = ConnectionAddr::Tcp(host, port).into_connection_info()?;
        redis::Client::open(info.set_redis_settings(self.master_settings.clone()))
    }

    /// No Sentinel named a master that says it is one.
    fn not_found(&self) -> Error {
        Error::Redis(redis::RedisError::from((
            redis::ErrorKind::MasterNameNotFoundBySentinel,
            "no Sentinel named a master that says it is one",
            self.master_name.clone(),
        )))
    }

    fn async_config(&self) -> AsyncConnectionConfig {
        AsyncConnectionConfig::new()
            .set_connection_timeout(Some(self.timeout))
            .set_response_timeout(Some(self.timeout))
    }
}

impl std::fmt::Debug for Sentinels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sentinels")
            .field(
                "sentinels",
                &self
                    .sentinels
                    .iter()
                    .map(ConnectionInfo::addr)
                    .collect::<Vec<_>>(),
            )
            .field("master_name", &self.master_name)
            .field("mapped", &self.map.is_some())
            .field("timeout", &self.timeout)
            .finish_non_exhaustive()
    }
}

/// The search through the Sentinels, in order: the first master a Sentinel
/// names that answers `ROLE` as a master is the one. A Sentinel that knows
/// no such master, or names a node that is no master (its view is stale
/// while another's is current), is passed over, and so is a named node
/// that cannot be reached (not asked twice: several Sentinels name the
/// same node); the error that ended the last try is returned when none
/// was found.
struct Search<'a> {
    sentinels: &'a Sentinels,
    unreachable: Vec<String>,
    error: Option<Error>,
}

impl<'a> Search<'a> {
    fn new(sentinels: &'a Sentinels) -> Search<'a> {
        Search {
            sentinels,
            unreachable: Vec::new(),
            error: None,
        }
    }

    /// A Sentinel's answer read: the node to check, if any and not found
    /// unreachable already.
    fn named(
        &mut self,
        answer: redis::RedisResult<Option<(String, u16)>>,
    ) -> Option<redis::Client> {
        match answer {
            Ok(Some((host, port))) => match self.sentinels.node(&host, port) {
                Ok(node) if self.unreachable.contains(&address(&node)) => None,
                Ok(node) => Some(node),
                Err(e) => self.failed(e),
            },
            Ok(None) => None,
            Err(e) => self.failed(e),
        }
    }

    /// `node`'s role read: the master when it says it is one.
    fn checked(
        &mut self,
        node: redis::Client,
        role: redis::RedisResult<Role>,
    ) -> Option<redis::Client> {
        match role {
            Ok(Role::Primary { .. }) => Some(node),
            Ok(_) => None,
            Err(e) => {
                self.unreachable.push(address(&node));
                self.failed(e)
            }
        }
    }

    fn failed(&mut self, e: redis::RedisError) -> Option<redis::Client> {
        self.error = Some(e.into());
        None
    }

    fn end(self) -> Error {
        self.error.unwrap_or_else(|| self.sentinels.not_found())
    }
}

/// True when `e` is what a call to a master that moved meets: its
/// connection lost or timed out, `READONLY` from a node demoted to a
/// replica, `MASTERDOWN` from a replica cut from its master, `LOADING`
/// from a node loading its data.
pub(crate) fn moved(e: &redis::RedisError) -> bool {
    is_io(e) || matches!(e.code(), Some("READONLY" | "MASTERDOWN" | "LOADING"))
}

/// The address `client` connects to.
pub(crate) fn address(client: &redis::Client) -> String {
    client.get_connection_info().addr().to_string()
}

/// The master the Sentinels name, asked with blocking connections.
pub(crate) fn find_blocking(sentinels: &Sentinels) -> Result<redis::Client> {
    fn query<T: redis::FromRedisValue>(
        client: &redis::Client,
        cmd: &redis::Cmd,
        timeout: Duration,
    ) -> redis::RedisResult<T> {
        let mut conn = client.get_connection_with_timeout(timeout)?;
        conn.set_read_timeout(Some(timeout))?;
        conn.set_write_timeout(Some(timeout))?;
        cmd.query(&mut conn)
    }
    let timeout = sentinels.timeout;
    let mut search = Search::new(sentinels);
    for sentinel in &sentinels.sentinels {
        let answer = redis::Client::open(sentinel.clone())
            .and_then(|s| query(&s, &sentinels.ask(), timeout));
        let Some(node) = search.named(answer) else {
            continue;
        };
        let role = query(&node, &redis::cmd("ROLE"), timeout);
        if let Some(master) = search.checked(node, role) {
            return Ok(master);
        }
    }
    Err(search.end())
}

/// The master the Sentinels name, asked on tokio.
pub(crate) async fn find(sentinels: &Sentinels) -> Result<redis::Client> {
    let config = sentinels.async_config();
    let mut search = Search::new(sentinels);
    for sentinel in &sentinels.sentinels {
        let answer = match redis::Client::open(sentinel.clone()) {
            Ok(s) => match s
                .get_multiplexed_async_connection_with_config(&config)
                .await
            {
                Ok(mut conn) => sentinels.ask().query_async(&mut conn).await,
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        };
        let Some(node) = search.named(answer) else {
            continue;
        };
        let role = match node
            .get_multiplexed_async_connection_with_config(&config)
            .await
        {
            Ok(mut conn) => redis::cmd("ROLE").query_async(&mut conn).await,
            Err(e) => Err(e),
        };
        if let Some(master) = search.checked(node, role) {
            return Ok(master);
        }
    }
    Err(search.end())
}

/// A deployment followed: its Sentinels and the master they last named.
pub(crate) struct Followed {
    sentinels: Sentinels,
    state: Mutex<State>,
}

struct State {
    master: redis::Client,
    /// A call failed as one to a master that moved fails: the Sentinels
    /// are asked before the next.
    suspect: bool,
    asked: Instant,
}

impl Followed {
    /// Follows `sentinels`, whose master was just found to be `master`.
    pub fn new(sentinels: Sentinels, master: redis::Client) -> Followed {
        Followed {
            sentinels,
            state: Mutex::new(State {
                master,
                suspect: false,
                asked: Instant::now(),
            }),
        }
    }

    fn state(&self) -> MutexGuard<'_, State> {
        // A panic elsewhere leaves the state as consistent as before it.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The master of the moment.
    pub fn master(&self) -> redis::Client {
        self.state().master.clone()
    }

    /// A call failed with `e`: when it is what a master that moved gives
    /// (its connection lost or timed out, `READONLY` from a demoted node,
    /// `MASTERDOWN`, `LOADING`, or an acquisition its replicas did not
    /// acknowledge: a node paused past its failover and resumed still says
    /// it is master), the Sentinels are asked before the next call.
    pub fn failed(&self, e: &Error) {
        let moved = match e {
            Error::NotSynced { .. } => true,
            Error::Redis(e) => moved(e),
            _ => false,
        };
        if moved {
            self.suspect();
        }
    }

    /// The Sentinels are asked before the next call.
    pub fn suspect(&self) {
        self.state().suspect = true;
    }

    /// True when the Sentinels are to be asked now (a call failed since
    /// they were last asked, at least [`REASK`] ago), marked asked.
    fn due(&self) -> bool {
        let mut state = self.state();
        let due = state.suspect && state.asked.elapsed() >= REASK;
        if due {
            state.asked = Instant::now();
        }
        due
    }

    /// Takes in what the Sentinels said: the master they named is the one
    /// from now on (the master before, if it moved, is returned: its idle
    /// connections are the caller's to close). When none could be asked,
    /// the master stays and is still suspect.
    fn settle(&self, found: Result<redis::Client>) -> Option<redis::Client> {
        let found = found.ok()?;
        let mut state = self.state();
        state.suspect = false;
        if address(&found) == address(&state.master) {
            return None;
        }
        Some(std::mem::replace(&mut state.master, found))
    }

    /// Asks the Sentinels, with blocking connections, when due; the master
    /// before if it moved.
    pub fn refresh_blocking(&self) -> Option<redis::Client> {
        if !self.due() {
            return None;
        }
        self.settle(find_blocking(&self.sentinels))
    }

    /// Asks the Sentinels, on tokio, when due; the master before if it
    /// moved.
    pub async fn refresh(&self) -> Option<redis::Client> {
        if !self.due() {
            return None;
        }
        self.settle(find(&self.sentinels).await)
    }
}

/// Where a hold is renewed and released: on the master that granted it, or
/// (followed through Sentinel) on the master of the moment, to which an
/// acknowledged hold was replicated.
#[derive(Clone)]
pub(crate) enum Place {
    Fixed(redis::Client),
    Followed(Arc<Followed>),
}

impl Place {
    /// The server to send to now.
    pub fn client(&self) -> redis::Client {
        match self {
            Place::Fixed(client) => client.clone(),
            Place::Followed(followed) => followed.master(),
        }
    }

    /// The deployment followed, if any.
    pub fn followed(&self) -> Option<&Followed> {
        match self {
            Place::Fixed(_) => None,
            Place::Followed(followed) => Some(followed),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn client(port: u16) -> redis::Client {
        redis::Client::open(format!("redis://127.0.0.1:{port}/")).expect("url")
    }

    #[test]
    fn an_announced_address_is_mapped_and_gets_the_master_settings() {
        let sentinels = Sentinels::new(["redis://127.0.0.1:26379/"], "m")
            .expect("sentinels")
            .with_master_settings(RedisConnectionInfo::default().set_db(3))
            .with_address_map(|host, port| (format!("{host}-proxy"), port + 1));
        let node = sentinels.node("10.0.0.1", 6379).expect("node");
        let info = node.get_connection_info();
        assert_eq!(info.addr().to_string(), "10.0.0.1-proxy:6380");
        assert_eq!(info.redis_settings().db(), 3);
        assert!(matches!(
            Sentinels::new(Vec::<&str>::new(), "m"),
            Err(Error::InvalidArgument(_))
        ));
    }

    #[test]
    fn a_moved_masters_errors_make_the_sentinels_asked_once_in_a_while() {
        let sentinels = Sentinels::new(["redis://127.0.0.1:1/"], "m").expect("sentinels");
        let followed = Followed::new(sentinels, client(10));
        followed.state().asked = Instant::now() - REASK;
        followed.failed(&Error::NotHeld);
        assert!(!followed.due(), "not an error of a master that moved");
        let readonly = redis::RedisError::from((
            redis::ErrorKind::Server(redis::ServerErrorKind::ReadOnly),
            "READONLY",
        ));
        followed.failed(&Error::Redis(readonly));
        assert!(followed.due());
        assert!(!followed.due(), "asked just now");
        // No Sentinel answered: the master stays, still suspect.
        assert!(followed.settle(Err(Error::NotHeld)).is_none());
        assert!(followed.state().suspect);
        // The same master named: nothing moved.
        assert!(followed.settle(Ok(client(10))).is_none());
        assert!(!followed.state().suspect);
        followed.failed(&Error::NotSynced {
            replicas: 1,
            waited: Duration::from_secs(1),
            replied: "WAIT 1 replied 0".into(),
        });
        let before = followed.settle(Ok(client(11))).expect("moved");
        assert_eq!(address(&before), "127.0.0.1:10");
        assert_eq!(address(&followed.master()), "127.0.0.1:11");
    }
}
