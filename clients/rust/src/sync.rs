//! The replica acknowledgement, for both clients: what the client learned
//! of each master (how many replicas it expects there, whether the master
//! writes an AOF and has `WAITAOF`), what an acquisition's pipeline carries
//! after the acquisition (`WAIT`, `WAITAOF`, now and then `INFO`) and how
//! their replies are read.
//!
//! The number of replicas is never concluded from the node just written
//! to: a master paused past its failover and resumed still says
//! `role:master` with `connected_slaves:0` until it is demoted, and an
//! acquisition that believed it would be acknowledged by nobody and lost
//! with the demotion. So `INFO` may only raise what is expected.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use redis::{Cmd, Pipeline, Value};

use crate::cluster::Route;
use crate::command::millis;
use crate::error::{Error, Result};
use crate::options::{Aof, Replicas, SyncOptions};

/// How often a master's `INFO` is asked again, inside an acquisition's
/// pipeline (no round trip of its own).
pub(crate) const REFRESH: Duration = Duration::from_secs(5);

/// What was learned of one master.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Learned {
    /// The most replicas it was ever seen with (`connected_slaves`).
    pub replicas: usize,
    /// It writes an append-only file (`aof_enabled:1`), as it last said.
    pub aof: bool,
    /// False once it refused `WAITAOF` as unknown (before Redis 7.2).
    pub wait_aof: bool,
    /// When `INFO` was last asked of it (when it was sent: acquisitions
    /// running meanwhile do not all ask again).
    asked: Instant,
}

/// What a client learned of the masters it acquired on, by
/// `Endpoint::learned_key` (outside a cluster, one for the deployment);
/// shared by every handle of the client (a new client starts over).
#[derive(Clone, Default)]
pub(crate) struct Masters(Arc<Mutex<HashMap<String, Learned>>>);

/// `INFO replication persistence`: the replicas and the AOF, in one call.
pub(crate) fn info() -> Cmd {
    let mut cmd = redis::cmd("INFO");
    cmd.arg("replication").arg("persistence");
    cmd
}

/// What an `INFO replication persistence` reply says: the connected
/// replicas (absent: none) and whether the AOF is on.
fn read_info(info: &str) -> (usize, bool) {
    let field = |name: &str| {
        info.lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .map(str::trim)
    };
    let replicas = field("connected_slaves")
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    (replicas, field("aof_enabled") == Some("1"))
}

impl Masters {
    fn map(&self) -> MutexGuard<'_, HashMap<String, Learned>> {
        // A panic elsewhere leaves the map as consistent as before it.
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// What `master` is known as, if anything.
    #[cfg(test)]
    pub fn get(&self, master: &str) -> Option<Learned> {
        self.map().get(master).copied()
    }

    /// Takes in `master`'s `INFO` reply: the replicas only ever rise.
    pub fn learn(&self, master: &str, info: &str, asked: Instant) {
        let (replicas, aof) = read_info(info);
        let mut map = self.map();
        let learned = map.entry(master.to_string()).or_insert(Learned {
            replicas: 0,
            aof,
            wait_aof: true,
            asked,
        });
        learned.replicas = learned.replicas.max(replicas);
        learned.aof = aof;
    }

    /// `master` refused `WAITAOF` as an unknown command.
    fn lacks_wait_aof(&self, master: &str) {
        if let Some(learned) = self.map().get_mut(master) {
            learned.wait_aof = false;
        }
    }

    /// What the next acquisition on `master` sends after it; None when the
    /// options need what nobody asked `master` yet: ask [`info`] (one
    /// round trip, once), [`Masters::learn`] its reply, and plan again.
    /// An `INFO` due again (every [`REFRESH`]) is marked asked now, and
    /// rides in this acquisition's pipeline.
    pub fn plan(&self, master: &str, options: &SyncOptions, now: Instant) -> Option<Plan> {
        self.planned(master, options, now, true)
    }

    /// What [`Masters::plan`] would say, without an `INFO` and marking
    /// nothing asked: to see ahead whether an acquisition will wait for
    /// something ([`Plan::extra`]).
    pub fn peek(&self, master: &str, options: &SyncOptions) -> Option<Plan> {
        self.planned(master, options, Instant::now(), false)
    }

    /// [`Masters::plan`]; `ask`: an `INFO` due is sent, and marked asked.
    fn planned(
        &self,
        master: &str,
        options: &SyncOptions,
        now: Instant,
        ask: bool,
    ) -> Option<Plan> {
        if !options.enabled {
            return Some(Plan::none());
        }
        let needs_info = options.replicas == Replicas::Auto || options.aof == Aof::Auto;
        let mut map = self.map();
        let learned = map.get_mut(master);
        let (learned, info) = match learned {
            Some(l) if needs_info => {
                let due = ask && now.saturating_duration_since(l.asked) >= REFRESH;
                if due {
                    l.asked = now;
                }
                (Some(*l), due)
            }
            Some(l) => (Some(*l), false),
            None if needs_info => return None,
            None => (None, false),
        };
        let replicas = match options.replicas {
            Replicas::Exactly(n) => n,
            Replicas::Auto => learned.map_or(0, |l| l.replicas),
        };
        // Unknown until refused: a master never asked is assumed to have it.
        let has_wait_aof = learned.is_none_or(|l| l.wait_aof);
        let (wait_aof, unmet) = match options.aof {
            Aof::Off => (false, None),
            Aof::Auto => (learned.is_some_and(|l| l.aof) && has_wait_aof, None),
            Aof::Required if has_wait_aof => (true, None),
            Aof::Required => (false, Some("the master has no WAITAOF".to_string())),
        };
        Some(Plan {
            replicas,
            wait_aof,
            aof_required: options.aof == Aof::Required,
            unmet,
            info,
            timeout: options.timeout,
        })
    }
}

/// What an acquisition's pipeline carries after the acquisition, for one
/// master.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Plan {
    /// `WAIT <replicas> <timeout>` when more than 0.
    pub replicas: usize,
    /// `WAITAOF 1 0 <timeout>`.
    pub wait_aof: bool,
    /// The fsync is required ([`Aof::Required`]), not only where there is
    /// an AOF.
    pub aof_required: bool,
    /// Why the acquisition cannot be acknowledged whatever the replies
    /// (the AOF is required of a master without `WAITAOF`).
    pub unmet: Option<String>,
    /// `INFO replication persistence`, last.
    pub info: bool,
    timeout: Duration,
}

impl Plan {
    /// Nothing after the acquisition (the acknowledgement turned off).
    pub fn none() -> Plan {
        Plan {
            replicas: 0,
            wait_aof: false,
            aof_required: false,
            unmet: None,
            info: false,
            timeout: Duration::ZERO,
        }
    }

    /// The commands after the acquisition, in this order.
    pub fn commands(&self) -> Vec<Cmd> {
        let timeout = millis(self.timeout);
        let mut commands = Vec::new();
        if self.replicas > 0 {
            let mut cmd = redis::cmd("WAIT");
            cmd.arg(self.replicas).arg(timeout);
            commands.push(cmd);
        }
        if self.wait_aof {
            let mut cmd = redis::cmd("WAITAOF");
            cmd.arg(1).arg(0).arg(timeout);
            commands.push(cmd);
        }
        if self.info {
            commands.push(info());
        }
        commands
    }

    /// How much longer than the acquisition's the pipeline's replies may
    /// take: each wait's timeout.
    pub fn extra(&self) -> Duration {
        self.timeout * (u32::from(self.replicas > 0) + u32::from(self.wait_aof))
    }

    /// Reads the replies of [`Plan::commands`], learning what they say of
    /// `master` (its `INFO`, a `WAITAOF` it does not know), whether or not
    /// the acquisition was granted; Ok when everything expected
    /// acknowledged it (what the caller ignores when it was refused).
    pub fn read(&self, replies: &[Value], masters: &Masters, master: &str) -> Result<()> {
        let mut replies = replies.iter();
        let mut verdict = match &self.unmet {
            Some(why) => Err(self.not_synced(why.clone())),
            None => Ok(()),
        };
        if self.replicas > 0 {
            let acknowledged = match replies.next() {
                Some(Value::Int(n)) => *n,
                other => return Err(Error::UnexpectedReply(format!("WAIT: {other:?}"))),
            };
            if acknowledged < 0 || (acknowledged as u64) < self.replicas as u64 {
                verdict = verdict.and(Err(
                    self.not_synced(format!("WAIT {} replied {acknowledged}", self.replicas))
                ));
            }
        }
        if self.wait_aof {
            match replies.next() {
                Some(Value::Array(counts)) => match counts.as_slice() {
                    [Value::Int(local), Value::Int(_)] if *local >= 1 => {}
                    [Value::Int(local), Value::Int(remote)] => {
                        verdict = verdict.and(Err(
                            self.not_synced(format!("WAITAOF 1 0 replied [{local}, {remote}]"))
                        ));
                    }
                    _ => return Err(Error::UnexpectedReply(format!("WAITAOF: {counts:?}"))),
                },
                Some(Value::ServerError(e)) => {
                    let said = format!("{} {}", e.code(), e.details().unwrap_or_default());
                    let unknown = said.to_ascii_lowercase().contains("unknown command");
                    if unknown {
                        masters.lacks_wait_aof(master);
                    }
                    // Unknown (before Redis 7.2): WAIT alone is the check,
                    // unless the AOF is required. Any other refusal (the
                    // AOF turned off since it was learned) leaves the fsync
                    // asked for unconfirmed.
                    if !unknown || self.aof_required {
                        verdict = verdict.and(Err(self.not_synced(format!("WAITAOF: {said}"))));
                    }
                }
                other => return Err(Error::UnexpectedReply(format!("WAITAOF: {other:?}"))),
            }
        }
        if self.info {
            // RESP2 sends INFO as a bulk string, RESP3 as a verbatim one.
            if let Some(Ok(text)) = replies.next().map(redis::from_redis_value_ref::<String>) {
                masters.learn(master, &text, Instant::now());
            }
        }
        verdict
    }

    /// NotSynced: `replied` is what fell short.
    pub fn not_synced(&self, replied: String) -> Error {
        Error::NotSynced {
            replicas: self.replicas,
            waited: self.timeout,
            replied,
        }
    }
}

/// The read timeout a call waiting `wait` needs on a connection whose
/// calls get `base`.
pub(crate) fn timeout(base: Option<Duration>, wait: Duration) -> Option<Duration> {
    base.map(|t| t + wait)
}

/// An acquisition's one round trip on one connection: `ASKING` (following
/// a cluster's `ASK`), the acquisition, after a resend its `touch` (the
/// write `WAIT` counts, see `Acquisition::touch`), then the plan's
/// commands. Every reply is read, errors included.
pub(crate) struct Trip {
    pub pipe: Pipeline,
    /// The node it is sent to.
    client: redis::Client,
    plan: Plan,
    /// The plan's commands are held back (see [`Trip::new`]).
    deferred: bool,
    /// Replies before the acquisition's.
    before: usize,
    /// Replies between the acquisition's and the plan's.
    between: usize,
}

impl Trip {
    /// The trip of `cmd` to where `route` is. `deferred`: to a node that
    /// may redirect it (the slot's master unknown yet), whose `WAIT` would
    /// wait for that node's replicas, for nothing: the plan's commands wait
    /// for the reply, in a round trip of their own ([`Answered::checks`]).
    pub fn new(route: &Route, deferred: bool, cmd: &Cmd, touch: Option<&Cmd>, plan: Plan) -> Trip {
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        if route.asking {
            pipe.cmd("ASKING");
        }
        pipe.add_command(cmd.clone());
        if let Some(touch) = touch {
            pipe.add_command(touch.clone());
        }
        if !deferred {
            for cmd in plan.commands() {
                pipe.add_command(cmd);
            }
        }
        Trip {
            pipe,
            client: route.client.clone(),
            plan,
            deferred,
            before: usize::from(route.asking),
            between: usize::from(touch.is_some()),
        }
    }

    /// The trip's `replies` read: the acquisition's, and the plan's
    /// commands'.
    pub fn split(self, replies: Vec<Value>) -> Result<Answered> {
        let mut replies = replies.into_iter().skip(self.before);
        let Some(reply) = replies.next() else {
            return Err(Error::UnexpectedReply("no reply to the acquisition".into()));
        };
        Ok(Answered {
            client: self.client,
            reply,
            plan: self.plan,
            after: replies.skip(self.between).collect(),
            deferred: self.deferred,
        })
    }
}

/// An acquisition's round trip, answered: the node it went to, the
/// acquisition's reply, the plan and the replies of its commands.
pub(crate) struct Answered {
    pub client: redis::Client,
    pub reply: Value,
    pub plan: Plan,
    pub after: Vec<Value>,
    deferred: bool,
}

impl Answered {
    /// The plan's commands held back ([`Trip::new`]), to send now in a
    /// round trip of their own: None when there are none, or when the reply
    /// is an error (a redirection or a refusal: nothing to acknowledge).
    pub fn checks(&self) -> Option<Pipeline> {
        // Asked after the cheap tests: building the commands allocates, on
        // every acquisition.
        if !self.deferred || matches!(self.reply, Value::ServerError(_)) {
            return None;
        }
        let commands = self.plan.commands();
        if commands.is_empty() {
            return None;
        }
        let mut pipe = redis::pipe();
        pipe.ignore_errors();
        for cmd in commands {
            pipe.add_command(cmd);
        }
        Some(pipe)
    }

    /// The error reply for the route to follow (a redirection; any other
    /// error is what the route returns); None when the lock answered.
    /// [`Error::NotSynced`] when the master refused it for want of
    /// replicas (`NOREPLICAS`: its `min-replicas-to-write`): nothing was
    /// written.
    pub fn refusal(&self) -> Result<Option<redis::RedisError>> {
        let Value::ServerError(e) = &self.reply else {
            return Ok(None);
        };
        let e = redis::RedisError::from(e.clone());
        if e.code() == Some("NOREPLICAS") {
            return Err(self.plan.not_synced(e.to_string()));
        }
        Ok(Some(e))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::command::args;

    const MASTER: &str = "127.0.0.1:6379";

    fn info(replicas: usize, aof: bool) -> String {
        format!(
            "# Replication\r\nrole:master\r\nconnected_slaves:{replicas}\r\n\
             # Persistence\r\naof_enabled:{}\r\n",
            u8::from(aof)
        )
    }

    /// Masters that learned [`MASTER`]'s `INFO` saying `replicas` and
    /// `aof`, and when.
    fn learned(replicas: usize, aof: bool) -> (Masters, Instant) {
        let masters = Masters::default();
        let now = Instant::now();
        masters.learn(MASTER, &info(replicas, aof), now);
        (masters, now)
    }

    fn names(plan: &Plan) -> Vec<String> {
        plan.commands().iter().map(|c| args(c).join(" ")).collect()
    }

    /// What an acquisition on [`MASTER`] sends after it, learned as it is.
    fn planned(masters: &Masters, options: &SyncOptions, now: Instant) -> Vec<String> {
        names(&masters.plan(MASTER, options, now).expect("learned"))
    }

    #[test]
    fn the_first_acquisition_on_a_master_asks_first_then_never_again_before_the_refresh() {
        let masters = Masters::default();
        let options = SyncOptions::default();
        let now = Instant::now();
        assert_eq!(masters.plan(MASTER, &options, now), None, "INFO first");
        masters.learn(MASTER, &info(2, false), now);
        let plan = masters.plan(MASTER, &options, now).expect("learned");
        assert_eq!(names(&plan), ["WAIT 2 1000"]);
        assert_eq!(plan.extra(), Duration::from_secs(1));
        // Due again after REFRESH: INFO rides in the pipeline, once.
        let later = now + REFRESH;
        let plan = masters.plan(MASTER, &options, later).expect("learned");
        assert_eq!(
            names(&plan),
            ["WAIT 2 1000", "INFO replication persistence"]
        );
        let again = masters.plan(MASTER, &options, later).expect("learned");
        assert_eq!(names(&again), ["WAIT 2 1000"], "asked already");
        // A peek neither sends INFO nor marks it asked.
        let fresh = Masters::default();
        assert_eq!(fresh.peek(MASTER, &options), None);
        let earlier = now.checked_sub(REFRESH).expect("a clock past 5 s");
        fresh.learn(MASTER, &info(0, false), earlier);
        let peeked = fresh.peek(MASTER, &options).expect("learned");
        assert!(peeked.commands().is_empty() && peeked.extra().is_zero());
        assert!(
            fresh.plan(MASTER, &options, now).expect("learned").info,
            "still due"
        );
    }

    #[test]
    fn info_only_raises_what_is_expected() {
        let masters = Masters::default();
        let options = SyncOptions::default();
        let now = Instant::now();
        masters.learn(MASTER, &info(1, false), now);
        masters.learn(MASTER, &info(2, false), now);
        // A paused or demoted master says 0: not believed.
        masters.learn(MASTER, &info(0, false), now);
        let plan = masters.plan(MASTER, &options, now).expect("learned");
        assert_eq!(plan.replicas, 2);
        // Through a pipeline's INFO reply too.
        let refresh = masters
            .plan(MASTER, &options, now + REFRESH)
            .expect("learned");
        let replies = [Value::Int(2), Value::BulkString(info(0, true).into_bytes())];
        assert!(refresh.read(&replies, &masters, MASTER).is_ok());
        let learned = masters.get(MASTER).expect("learned");
        assert_eq!((learned.replicas, learned.aof), (2, true));
        // Another master is learned apart.
        assert_eq!(masters.plan("127.0.0.1:6380", &options, now), None);
    }

    #[test]
    fn an_explicit_count_wins() {
        let (masters, now) = learned(3, false);
        let one = SyncOptions {
            replicas: Replicas::Exactly(1),
            ..SyncOptions::default()
        };
        assert_eq!(planned(&masters, &one, now), ["WAIT 1 1000"]);
        let none = SyncOptions {
            replicas: Replicas::Exactly(0),
            aof: Aof::Off,
            ..SyncOptions::default()
        };
        // Nothing to learn: no INFO ever, on a master never asked either.
        let fresh = Masters::default();
        let plan = fresh
            .plan(MASTER, &none, now + REFRESH)
            .expect("nothing to learn");
        assert!(plan.commands().is_empty());
        let off = SyncOptions {
            enabled: false,
            ..SyncOptions::default()
        };
        assert_eq!(fresh.plan(MASTER, &off, now), Some(Plan::none()));
    }

    #[test]
    fn the_aof_auto_required_or_off() {
        let (masters, now) = learned(0, true);
        let auto = SyncOptions::default();
        assert_eq!(planned(&masters, &auto, now), ["WAITAOF 1 0 1000"]);
        let off = SyncOptions {
            aof: Aof::Off,
            ..SyncOptions::default()
        };
        assert!(planned(&masters, &off, now).is_empty());
        // Required: also where the master says it writes none.
        let required = SyncOptions {
            aof: Aof::Required,
            replicas: Replicas::Exactly(0),
            ..SyncOptions::default()
        };
        let fresh = Masters::default();
        let plan = fresh
            .plan(MASTER, &required, now)
            .expect("nothing to learn");
        assert_eq!(names(&plan), ["WAITAOF 1 0 1000"]);
        // A master without an AOF refuses WAITAOF: a required fsync fails.
        let refused = error(
            "-ERR WAITAOF cannot be used when numlocal is set but appendonly is disabled.\r\n",
        );
        assert!(matches!(
            plan.read(&[refused], &fresh, MASTER),
            Err(Error::NotSynced { .. })
        ));
    }

    /// A server's error reply, as a pipeline with `ignore_errors` gives it.
    fn error(resp: &str) -> Value {
        let value = redis::parse_redis_value(resp.as_bytes()).expect("RESP");
        assert!(matches!(value, Value::ServerError(_)), "{value:?}");
        value
    }

    #[test]
    fn a_master_without_waitaof_is_learned() {
        let (masters, now) = learned(0, true);
        let auto = SyncOptions::default();
        let plan = masters.plan(MASTER, &auto, now).expect("p");
        let unknown = || error("-ERR unknown command 'WAITAOF', with args beginning with: \r\n");
        // AUTO: WAIT alone is the check; WAITAOF is not sent again.
        assert!(plan.read(&[unknown()], &masters, MASTER).is_ok());
        assert!(planned(&masters, &auto, now).is_empty());
        // Required: it fails, at once on that master thereafter.
        let required = SyncOptions {
            aof: Aof::Required,
            ..SyncOptions::default()
        };
        let plan = masters.plan(MASTER, &required, now).expect("p");
        assert!(plan.commands().is_empty());
        assert!(matches!(
            plan.read(&[], &masters, MASTER),
            Err(Error::NotSynced { .. })
        ));
    }

    #[test]
    fn replies_decide_and_unknown_waitaof_is_learned() {
        let (masters, now) = learned(1, true);
        let plan = masters
            .plan(MASTER, &SyncOptions::default(), now)
            .expect("p");
        assert_eq!(names(&plan), ["WAIT 1 1000", "WAITAOF 1 0 1000"]);
        let fsynced = Value::Array(vec![Value::Int(1), Value::Int(0)]);
        assert!(plan
            .read(&[Value::Int(1), fsynced.clone()], &masters, MASTER)
            .is_ok());
        match plan.read(&[Value::Int(0), fsynced], &masters, MASTER) {
            Err(Error::NotSynced {
                replicas: 1,
                replied,
                ..
            }) => {
                assert_eq!(replied, "WAIT 1 replied 0")
            }
            other => panic!("{other:?}"),
        }
        let lost = Value::Array(vec![Value::Int(0), Value::Int(0)]);
        assert!(matches!(
            plan.read(&[Value::Int(1), lost], &masters, MASTER),
            Err(Error::NotSynced { .. })
        ));
        assert!(matches!(
            plan.read(&[Value::Okay], &masters, MASTER),
            Err(Error::UnexpectedReply(_))
        ));
    }
}
