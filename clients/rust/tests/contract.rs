//! The client contract's shared scenarios (`clients/contract/scenarios.json`,
//! or the file `RWLOCK_SCENARIOS` names), run through the blocking client
//! ([`Client`]) against one server with the module, as
//! `clients/contract/README.md` says: each scenario on a flushed server
//! with its command statistics reset, its steps in order on this thread (so
//! each lock's owner, `<client id>:<thread id>`, is fixed for it), its
//! `later` commands on threads and connections of their own, checked when
//! it ends. A step, field or expectation the runner does not know fails its
//! scenario; every failing scenario is reported, with the step's index.

use std::collections::HashMap;
use std::path::PathBuf;
use std::thread::{self, JoinHandle};
use std::time::{Duration, Instant};

use regex::Regex;
use rwlock_client::{
    Client, CountDownLatch, Error, Guard, LeasedPermits, Lock, MultiLock, Options,
    PermitExpirableSemaphore, Permits, ReadWriteLock, Semaphore,
};
use serde_json::{Map, Value as Json};
use testkit::{workspace_root, Server};

/// A check's outcome: what went wrong, in words.
type Outcome<T = ()> = Result<T, String>;

/// A raw command's reply: the reply as JSON, or the error reply's text.
type Reply = Result<Json, String>;

/// How long a raw command of the runner may take: none of the scenarios'
/// blocks, so a hung server fails the run instead of stalling it.
const RAW_TIMEOUT: Duration = Duration::from_secs(10);

// ---- reading the file -------------------------------------------------------

/// An object's fields, each taken at most once; [`Fields::done`] refuses
/// any left over, which the runner does not know.
struct Fields<'a> {
    what: String,
    map: &'a Map<String, Json>,
    taken: Vec<&'static str>,
}

impl<'a> Fields<'a> {
    fn of(what: impl Into<String>, json: &'a Json) -> Outcome<Fields<'a>> {
        let what = what.into();
        match json {
            Json::Object(map) => Ok(Fields {
                what,
                map,
                taken: Vec::new(),
            }),
            other => Err(format!("{what}: an object expected, got {other}")),
        }
    }

    fn take(&mut self, key: &'static str) -> Option<&'a Json> {
        self.taken.push(key);
        self.map.get(key)
    }

    fn need(&mut self, key: &'static str) -> Outcome<&'a Json> {
        self.take(key)
            .ok_or_else(|| format!("{}: the field `{key}` is missing", self.what))
    }

    fn done(self) -> Outcome {
        let unknown: Vec<&String> = self
            .map
            .keys()
            .filter(|k| !self.taken.contains(&k.as_str()))
            .collect();
        if unknown.is_empty() {
            Ok(())
        } else {
            Err(format!("{}: unknown fields {unknown:?}", self.what))
        }
    }
}

fn string(what: &str, json: &Json) -> Outcome<String> {
    json.as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("{what}: a string expected, got {json}"))
}

fn millis(what: &str, json: &Json) -> Outcome<u64> {
    json.as_u64()
        .ok_or_else(|| format!("{what}: a number of ms expected, got {json}"))
}

/// `null` or a number of ms.
fn maybe_millis(what: &str, json: &Json) -> Outcome<Option<u64>> {
    match json {
        Json::Null => Ok(None),
        other => millis(what, other).map(Some),
    }
}

fn integer_field(what: &str, json: &Json) -> Outcome<i64> {
    json.as_i64()
        .ok_or_else(|| format!("{what}: an integer expected, got {json}"))
}

fn boolean(what: &str, json: &Json) -> Outcome<bool> {
    json.as_bool()
        .ok_or_else(|| format!("{what}: true or false expected, got {json}"))
}

fn strings(what: &str, json: &Json) -> Outcome<Vec<String>> {
    let Json::Array(items) = json else {
        return Err(format!("{what}: an array of strings expected, got {json}"));
    };
    items.iter().map(|item| string(what, item)).collect()
}

/// A client entry: its options.
fn client_options(name: &str, json: &Json) -> Outcome<Options> {
    let mut fields = Fields::of(format!("client {name}"), json)?;
    let mut options = Options::default();
    if let Some(ms) = fields.take("watchdog_timeout_ms") {
        options.watchdog_timeout = Duration::from_millis(millis("watchdog_timeout_ms", ms)?);
    }
    if let Some(ms) = fields.take("socket_timeout_ms") {
        let ms = millis("socket_timeout_ms", ms)?;
        options.response_timeout = Some(Duration::from_millis(ms));
    }
    fields.done()?;
    Ok(options)
}

/// What a lock entry asks for.
struct LockSpec {
    client: String,
    kind: String,
    name: Option<String>,
    holds: Vec<(String, String)>,
    session: bool,
}

fn lock_spec(label: &str, json: &Json) -> Outcome<LockSpec> {
    let mut fields = Fields::of(format!("lock {label}"), json)?;
    let client = string("client", fields.need("client")?)?;
    let kind = string("kind", fields.need("kind")?)?;
    let name = fields.take("name").map(|n| string("name", n)).transpose()?;
    let holds = match fields.take("holds") {
        None => Vec::new(),
        Some(Json::Array(holds)) => holds
            .iter()
            .map(|hold| match strings("holds", hold)?.as_slice() {
                [kind, name] => Ok((kind.clone(), name.clone())),
                other => Err(format!(
                    "lock {label}: a hold is [KIND, name], got {other:?}"
                )),
            })
            .collect::<Outcome<_>>()?,
        Some(other) => return Err(format!("lock {label}: holds must be an array, got {other}")),
    };
    let session = match fields.take("session") {
        None => false,
        Some(flag) => boolean("session", flag)?,
    };
    fields.done()?;
    if session && matches!(kind.as_str(), "semaphore" | "permit" | "latch" | "fair") {
        return Err(format!("lock {label}: a {kind} has no session holds"));
    }
    let multi = kind == "multi";
    if multi != name.is_none() || multi == holds.is_empty() {
        return Err(format!(
            "lock {label}: a multi lock has `holds` and no `name`, the others a `name`"
        ));
    }
    Ok(LockSpec {
        client,
        kind,
        name,
        holds,
        session,
    })
}

/// One step of a scenario.
#[derive(Debug)]
enum Step {
    Acquire {
        lock: String,
        wait_ms: Option<u64>,
        lease_ms: Option<u64>,
        expect: String,
        elapsed_ms: Option<(u64, u64)>,
        save_token: Option<String>,
    },
    Release {
        lock: String,
        expect: String,
    },
    /// `within_ms`: what the watchdog finds in the background, polled until
    /// it is as expected (0: looked at once).
    Held {
        lock: String,
        expect: bool,
        within_ms: u64,
    },
    Lost {
        lock: String,
        expect: bool,
        within_ms: u64,
    },
    Token {
        lock: String,
        expect: Json,
    },
    Redis {
        args: Vec<String>,
        expect: Json,
        save: Option<String>,
    },
    Later {
        after_ms: u64,
        args: Vec<String>,
        expect: Json,
    },
    Sleep(u64),
    Calls(Vec<(String, Json)>),
    ResetCalls,
    /// A semaphore's acquisition of `permits`.
    Take {
        semaphore: String,
        permits: u64,
        wait_ms: Option<u64>,
        expect: String,
        elapsed_ms: Option<(u64, u64)>,
    },
    /// A semaphore's release of `permits`.
    GiveBack {
        semaphore: String,
        permits: u64,
        expect: String,
    },
    TrySetPermits {
        semaphore: String,
        permits: i64,
        expect: bool,
    },
    AddPermits {
        semaphore: String,
        permits: i64,
    },
    Available {
        semaphore: String,
        expect: Json,
    },
    Drain {
        semaphore: String,
        expect: Json,
    },
    /// A permit-expirable semaphore's acquisition: `lease_ms` None leaves
    /// the permits to the watchdog, -1 never expires; the ids saved under
    /// `save_ids`.
    TakeIds {
        permit: String,
        permits: u64,
        lease_ms: Option<i64>,
        wait_ms: Option<u64>,
        expect: String,
        elapsed_ms: Option<(u64, u64)>,
        save_ids: Option<String>,
    },
    /// A release of the ids saved under `ids`, all or none.
    ReleaseIds {
        permit: String,
        ids: String,
        expect: String,
    },
    UpdateLease {
        permit: String,
        ids: String,
        lease_ms: i64,
        expect: bool,
    },
    LeaseLeft {
        permit: String,
        ids: String,
        expect: Json,
    },
    Acquired {
        permit: String,
        expect: Json,
    },
    TrySetCount {
        latch: String,
        count: u64,
        expect: bool,
    },
    CountDown {
        latch: String,
    },
    Count {
        latch: String,
        expect: Json,
    },
    Await {
        latch: String,
        wait_ms: Option<u64>,
        expect: bool,
        elapsed_ms: Option<(u64, u64)>,
    },
    Delete {
        latch: String,
        expect: bool,
    },
}

/// The action keys a step may have, exactly one of them.
const ACTIONS: [&str; 22] = [
    "acquire",
    "release",
    "held",
    "lost",
    "token",
    "redis",
    "later",
    "sleep_ms",
    "calls",
    "reset_calls",
    "try_set_permits",
    "add_permits",
    "available",
    "drain",
    "try_set_count",
    "count_down",
    "count",
    "await",
    "delete",
    "update_lease",
    "lease_left",
    "acquired",
];

/// An optional `elapsed_ms: [lo, hi]`.
fn elapsed(fields: &mut Fields) -> Outcome<Option<(u64, u64)>> {
    let Some(range) = fields.take("elapsed_ms") else {
        return Ok(None);
    };
    match range.as_array().map(Vec::as_slice) {
        Some([lo, hi]) => Ok(Some((millis("elapsed_ms", lo)?, millis("elapsed_ms", hi)?))),
        _ => Err(format!("elapsed_ms: [lo, hi] expected, got {range}")),
    }
}

/// The label `action` names, which must be a lock entry of `kind`.
fn entry_of(
    fields: &mut Fields,
    action: &'static str,
    kind: &str,
    kinds: &HashMap<String, String>,
) -> Outcome<String> {
    let label = string(action, fields.need(action)?)?;
    match kinds.get(&label) {
        Some(k) if k == kind => Ok(label),
        Some(k) => Err(format!("{action}: `{label}` is a {k}, not a {kind}")),
        None => Err(format!("{action}: no lock `{label}` in the scenario")),
    }
}

/// The label `action` names, which must be a semaphore's or a
/// permit-expirable semaphore's entry (the steps on their counts).
fn counted_entry(
    fields: &mut Fields,
    action: &'static str,
    kinds: &HashMap<String, String>,
) -> Outcome<String> {
    let label = string(action, fields.need(action)?)?;
    match kinds.get(&label).map(String::as_str) {
        Some("semaphore" | "permit") => Ok(label),
        Some(k) => Err(format!("{action}: `{label}` is a {k}, not a semaphore")),
        None => Err(format!("{action}: no lock `{label}` in the scenario")),
    }
}

/// A permit step's `lease_ms`: null (the watchdog's), -1 (never) or ms.
fn lease_field(json: &Json) -> Outcome<Option<i64>> {
    match json {
        Json::Null => Ok(None),
        other => integer_field("lease_ms", other).map(Some),
    }
}

/// A semaphore step's `permits`: 1 when absent.
fn permits(fields: &mut Fields) -> Outcome<u64> {
    fields
        .take("permits")
        .map_or(Ok(1), |n| millis("permits", n))
}

/// One step; `kinds` gives each lock entry's kind, which says how an
/// `acquire` or a `release` reads (a semaphore's take `permits` and no
/// lease).
fn step(json: &Json, kinds: &HashMap<String, String>) -> Outcome<Step> {
    let mut fields = Fields::of("step", json)?;
    let mut actions: Vec<&str> = ACTIONS
        .into_iter()
        .filter(|a| fields.map.contains_key(*a))
        .collect();
    // `count` is also a field, of `try_set_count`: the action only alone.
    if actions.len() > 1 {
        actions.retain(|a| *a != "count");
    }
    let [action] = actions.as_slice() else {
        let keys: Vec<&String> = fields.map.keys().collect();
        return Err(format!(
            "a step has exactly one action of {ACTIONS:?}, this one {keys:?}"
        ));
    };
    let map = fields.map;
    let kind_of_entry = map
        .get(*action)
        .and_then(Json::as_str)
        .and_then(|label| kinds.get(label));
    let on_semaphore = kind_of_entry.is_some_and(|kind| kind == "semaphore");
    let on_permit = kind_of_entry.is_some_and(|kind| kind == "permit");
    let step = match *action {
        "acquire" if on_permit => Step::TakeIds {
            permit: string("acquire", fields.need("acquire")?)?,
            permits: permits(&mut fields)?,
            lease_ms: lease_field(fields.need("lease_ms")?)?,
            wait_ms: maybe_millis("wait_ms", fields.need("wait_ms")?)?,
            expect: string("expect", fields.need("expect")?)?,
            elapsed_ms: elapsed(&mut fields)?,
            save_ids: fields
                .take("save_ids")
                .map(|n| string("save_ids", n))
                .transpose()?,
        },
        "release" if on_permit => Step::ReleaseIds {
            permit: string("release", fields.need("release")?)?,
            ids: string("ids", fields.need("ids")?)?,
            expect: string("expect", fields.need("expect")?)?,
        },
        "update_lease" => Step::UpdateLease {
            permit: entry_of(&mut fields, "update_lease", "permit", kinds)?,
            ids: string("ids", fields.need("ids")?)?,
            lease_ms: integer_field("lease_ms", fields.need("lease_ms")?)?,
            expect: boolean("expect", fields.need("expect")?)?,
        },
        "lease_left" => Step::LeaseLeft {
            permit: entry_of(&mut fields, "lease_left", "permit", kinds)?,
            ids: string("ids", fields.need("ids")?)?,
            expect: fields.need("expect")?.clone(),
        },
        "acquired" => Step::Acquired {
            permit: entry_of(&mut fields, "acquired", "permit", kinds)?,
            expect: fields.need("expect")?.clone(),
        },
        "acquire" if on_semaphore => Step::Take {
            semaphore: string("acquire", fields.need("acquire")?)?,
            permits: permits(&mut fields)?,
            wait_ms: maybe_millis("wait_ms", fields.need("wait_ms")?)?,
            expect: string("expect", fields.need("expect")?)?,
            elapsed_ms: elapsed(&mut fields)?,
        },
        "release" if on_semaphore => Step::GiveBack {
            semaphore: string("release", fields.need("release")?)?,
            permits: permits(&mut fields)?,
            expect: string("expect", fields.need("expect")?)?,
        },
        "try_set_permits" => Step::TrySetPermits {
            semaphore: counted_entry(&mut fields, "try_set_permits", kinds)?,
            permits: integer_field("permits", fields.need("permits")?)?,
            expect: boolean("expect", fields.need("expect")?)?,
        },
        "add_permits" => Step::AddPermits {
            semaphore: counted_entry(&mut fields, "add_permits", kinds)?,
            permits: integer_field("permits", fields.need("permits")?)?,
        },
        "available" => Step::Available {
            semaphore: counted_entry(&mut fields, "available", kinds)?,
            expect: fields.need("expect")?.clone(),
        },
        "drain" => Step::Drain {
            semaphore: entry_of(&mut fields, "drain", "semaphore", kinds)?,
            expect: fields.need("expect")?.clone(),
        },
        "try_set_count" => Step::TrySetCount {
            latch: entry_of(&mut fields, "try_set_count", "latch", kinds)?,
            count: millis("count", fields.need("count")?)?,
            expect: boolean("expect", fields.need("expect")?)?,
        },
        "count_down" => Step::CountDown {
            latch: entry_of(&mut fields, "count_down", "latch", kinds)?,
        },
        "count" => Step::Count {
            latch: entry_of(&mut fields, "count", "latch", kinds)?,
            expect: fields.need("expect")?.clone(),
        },
        "await" => Step::Await {
            latch: entry_of(&mut fields, "await", "latch", kinds)?,
            wait_ms: maybe_millis("wait_ms", fields.need("wait_ms")?)?,
            expect: boolean("expect", fields.need("expect")?)?,
            elapsed_ms: elapsed(&mut fields)?,
        },
        "delete" => Step::Delete {
            latch: entry_of(&mut fields, "delete", "latch", kinds)?,
            expect: boolean("expect", fields.need("expect")?)?,
        },
        "acquire" => Step::Acquire {
            lock: string("acquire", fields.need("acquire")?)?,
            wait_ms: maybe_millis("wait_ms", fields.need("wait_ms")?)?,
            lease_ms: maybe_millis("lease_ms", fields.need("lease_ms")?)?,
            expect: string("expect", fields.need("expect")?)?,
            elapsed_ms: elapsed(&mut fields)?,
            save_token: fields
                .take("save_token")
                .map(|n| string("save_token", n))
                .transpose()?,
        },
        "release" => Step::Release {
            lock: string("release", fields.need("release")?)?,
            expect: string("expect", fields.need("expect")?)?,
        },
        "held" => Step::Held {
            lock: string("held", fields.need("held")?)?,
            expect: boolean("expect", fields.need("expect")?)?,
            within_ms: fields
                .take("within_ms")
                .map_or(Ok(0), |ms| millis("within_ms", ms))?,
        },
        "lost" => Step::Lost {
            lock: string("lost", fields.need("lost")?)?,
            expect: boolean("expect", fields.need("expect")?)?,
            within_ms: fields
                .take("within_ms")
                .map_or(Ok(0), |ms| millis("within_ms", ms))?,
        },
        "token" => Step::Token {
            lock: string("token", fields.need("token")?)?,
            expect: fields.need("expect")?.clone(),
        },
        "redis" => Step::Redis {
            args: strings("redis", fields.need("redis")?)?,
            expect: fields.need("expect")?.clone(),
            save: fields.take("save").map(|n| string("save", n)).transpose()?,
        },
        "later" => {
            let mut later = Fields::of("later", fields.need("later")?)?;
            let step = Step::Later {
                after_ms: millis("after_ms", later.need("after_ms")?)?,
                args: strings("redis", later.need("redis")?)?,
                expect: later.need("expect")?.clone(),
            };
            later.done()?;
            step
        }
        "sleep_ms" => Step::Sleep(millis("sleep_ms", fields.need("sleep_ms")?)?),
        "calls" => {
            let Json::Object(calls) = fields.need("calls")? else {
                return Err("calls: an object of command: count expected".into());
            };
            Step::Calls(calls.iter().map(|(k, v)| (k.clone(), v.clone())).collect())
        }
        _ => {
            if fields.need("reset_calls")? != &Json::Bool(true) {
                return Err("reset_calls: true expected".into());
            }
            Step::ResetCalls
        }
    };
    fields.done()?;
    Ok(step)
}

/// A scenario, read whole before it runs.
struct Scenario {
    name: String,
    clients: Vec<(String, Options)>,
    locks: Vec<(String, LockSpec)>,
    steps: Vec<Step>,
}

fn scenario(json: &Json) -> Outcome<Scenario> {
    let mut fields = Fields::of("scenario", json)?;
    let name = string("name", fields.need("name")?)?;
    let in_scenario = |e: String| format!("{name}: {e}");
    let entries = |field: &'static str, fields: &mut Fields| -> Outcome<Map<String, Json>> {
        match fields.need(field)? {
            Json::Object(map) => Ok(map.clone()),
            other => Err(format!("{field}: an object expected, got {other}")),
        }
    };
    let clients = entries("clients", &mut fields)
        .and_then(|map| {
            map.iter()
                .map(|(k, v)| Ok((k.clone(), client_options(k, v)?)))
                .collect::<Outcome<Vec<_>>>()
        })
        .map_err(in_scenario)?;
    let locks = entries("locks", &mut fields)
        .and_then(|map| {
            map.iter()
                .map(|(k, v)| Ok((k.clone(), lock_spec(k, v)?)))
                .collect::<Outcome<Vec<_>>>()
        })
        .map_err(in_scenario)?;
    let Json::Array(steps) = fields.need("steps").map_err(in_scenario)? else {
        return Err(in_scenario("steps: an array expected".into()));
    };
    let kinds: HashMap<String, String> = locks
        .iter()
        .map(|(label, spec)| (label.clone(), spec.kind.clone()))
        .collect();
    let steps = steps
        .iter()
        .enumerate()
        .map(|(i, s)| step(s, &kinds).map_err(|e| format!("{name}: step {i}: {e}")))
        .collect::<Outcome<Vec<_>>>()?;
    fields.done().map_err(in_scenario)?;
    Ok(Scenario {
        name,
        clients,
        locks,
        steps,
    })
}

/// The file's scenarios, each read on its own (so one that cannot be read
/// fails alone).
fn scenarios(file: &Json) -> Outcome<Vec<Outcome<Scenario>>> {
    let mut fields = Fields::of("the scenario file", file)?;
    if fields.need("version")? != &Json::from(1) {
        return Err("version: this runner reads version 1".into());
    }
    let Json::Array(all) = fields.need("scenarios")? else {
        return Err("scenarios: an array expected".into());
    };
    fields.done()?;
    Ok(all.iter().map(scenario).collect())
}

// ---- expectations -----------------------------------------------------------

/// A RESP2 reply as JSON: integers as numbers, bulk and status strings as
/// strings, nil as null, arrays as arrays.
fn json_of(value: &redis::Value) -> Reply {
    use redis::Value;
    Ok(match value {
        Value::Nil => Json::Null,
        Value::Int(n) => Json::from(*n),
        Value::BulkString(bytes) => Json::from(String::from_utf8_lossy(bytes).into_owned()),
        Value::SimpleString(s) => Json::from(s.clone()),
        Value::Okay => Json::from("OK"),
        Value::Array(items) => Json::Array(items.iter().map(json_of).collect::<Result<_, _>>()?),
        Value::ServerError(e) => return Err(format!("{e:?}")),
        other => return Err(format!("a reply RESP2 does not have: {other:?}")),
    })
}

/// A raw command's reply; an error reply as its text (`ERR …`).
fn reply_of(result: redis::RedisResult<redis::Value>) -> Reply {
    match result {
        Ok(value) => json_of(&value),
        Err(e) => match (e.code(), e.detail()) {
            (Some(code), Some(detail)) => Err(format!("{code} {detail}")),
            (Some(code), None) => Err(code.to_string()),
            _ => Err(e.to_string()),
        },
    }
}

/// An integer, or a string of one (as `GET` replies).
fn integer(json: &Json) -> Option<i64> {
    match json {
        Json::Number(n) => n.as_i64(),
        Json::String(s) => s.parse().ok(),
        _ => None,
    }
}

/// `re` matching the whole of `text`.
fn fully(re: &str, text: &str) -> Outcome<bool> {
    let re = Regex::new(&format!("^(?:{re})$")).map_err(|e| format!("bad regex: {e}"))?;
    Ok(re.is_match(text))
}

/// Ok when `got` is what `expect` (a JSON value, or one of the README's
/// matching objects) says; `saved` holds the values `$v` names.
fn check(expect: &Json, got: &Reply, saved: &HashMap<String, Json>) -> Outcome {
    let fail = || Err(format!("expected {expect}, got {got:?}"));
    let Json::Object(matcher) = expect else {
        return match got {
            Ok(value) if value == expect => Ok(()),
            _ => fail(),
        };
    };
    let [(how, arg)] = matcher.iter().collect::<Vec<_>>()[..] else {
        return Err(format!(
            "an expectation object has one key, this one {expect}"
        ));
    };
    if how == "error" {
        let prefix = string("error", arg)?;
        return match got {
            Err(text) if text.starts_with(&prefix) => Ok(()),
            _ => fail(),
        };
    }
    let Ok(value) = got else { return fail() };
    let holds = match how.as_str() {
        "between" => match arg.as_array().map(Vec::as_slice) {
            Some([lo, hi]) => {
                let (lo, hi) = (integer(lo), integer(hi));
                if lo.is_none() || hi.is_none() {
                    return Err(format!("between: [lo, hi] integers expected, got {arg}"));
                }
                value.is_i64() && integer(value).is_some_and(|v| lo <= Some(v) && Some(v) <= hi)
            }
            _ => return Err(format!("between: [lo, hi] expected, got {arg}")),
        },
        "match" => match value {
            Json::String(text) => fully(&string("match", arg)?, text)?,
            _ => false,
        },
        "each_match" => {
            let re = string("each_match", arg)?;
            match value {
                Json::Array(items) => {
                    let mut all = true;
                    for item in items {
                        all &= matches!(item, Json::String(t) if fully(&re, t)?);
                    }
                    all
                }
                _ => false,
            }
        }
        "len" => {
            let n = arg
                .as_u64()
                .ok_or_else(|| format!("len: a number expected, got {arg}"))?;
            value
                .as_array()
                .is_some_and(|items| items.len() as u64 == n)
        }
        "gt" | "eq" => {
            let name = string(how, arg)?;
            let Some(was) = name
                .strip_prefix('$')
                .and_then(|n| saved.get(n))
                .and_then(integer)
            else {
                return Err(format!("{how}: `{name}` is no saved integer"));
            };
            integer(value).is_some_and(|v| if how == "gt" { v > was } else { v == was })
        }
        _ => return Err(format!("unknown expectation `{how}`")),
    };
    if holds {
        Ok(())
    } else {
        fail()
    }
}

/// How many times each command ran since the statistics were reset.
fn command_calls(conn: &mut testkit::Conn) -> Outcome<HashMap<String, i64>> {
    let info: String = redis::cmd("INFO")
        .arg("commandstats")
        .query(conn)
        .map_err(|e| format!("INFO commandstats: {e}"))?;
    let mut calls = HashMap::new();
    for line in info.lines() {
        let Some((name, rest)) = line
            .strip_prefix("cmdstat_")
            .and_then(|l| l.split_once(':'))
        else {
            continue;
        };
        let count = rest
            .split(',')
            .find_map(|kv| kv.strip_prefix("calls="))
            .and_then(|n| n.parse().ok())
            .ok_or_else(|| format!("INFO commandstats: no calls in `{line}`"))?;
        calls.insert(name.to_string(), count);
    }
    Ok(calls)
}

// ---- running ----------------------------------------------------------------

/// A lock entry made by its client.
enum LockObject {
    Plain(Lock),
    Read(ReadWriteLock),
    Write(ReadWriteLock),
    Multi(MultiLock),
    Semaphore(Semaphore),
    Permit(PermitExpirableSemaphore),
    Latch(CountDownLatch),
}

impl LockObject {
    fn make(
        spec: &LockSpec,
        locks: &Client,
        read_write: &mut HashMap<(String, String), (ReadWriteLock, bool)>,
    ) -> Outcome<LockObject> {
        let name = spec.name.as_deref().unwrap_or_default();
        let plain = |lock: Lock| {
            if spec.session {
                lock.with_session()
            } else {
                lock
            }
        };
        Ok(match spec.kind.as_str() {
            "plain" => LockObject::Plain(plain(locks.lock(name))),
            "fenced" => LockObject::Plain(plain(locks.fenced_lock(name))),
            "nonreentrant" => LockObject::Plain(plain(locks.lock(name).non_reentrant())),
            "fair" if spec.session => {
                return Err(format!("{name}: a fair lock has no session holds"));
            }
            "fair" => LockObject::Plain(locks.fair_lock(name)),
            kind @ ("read" | "write") => {
                // One read-write lock object per client and name, whose
                // read and write sides share the owner.
                let key = (spec.client.clone(), name.to_string());
                let (lock, session) = read_write.entry(key).or_insert_with(|| {
                    let lock = locks.read_write_lock(name);
                    let lock = if spec.session {
                        lock.with_session()
                    } else {
                        lock
                    };
                    (lock, spec.session)
                });
                if *session != spec.session {
                    return Err(format!("the two sides of {name} differ in `session`"));
                }
                if kind == "read" {
                    LockObject::Read(lock.clone())
                } else {
                    LockObject::Write(lock.clone())
                }
            }
            "multi" => {
                let mut multi = locks.multi_lock();
                for (kind, name) in &spec.holds {
                    multi = match kind.as_str() {
                        "LOCK" => multi.lock(name),
                        "READ" => multi.read(name),
                        "WRITE" => multi.write(name),
                        other => return Err(format!("unknown hold kind `{other}`")),
                    };
                }
                if spec.session {
                    multi = multi.with_session();
                }
                LockObject::Multi(multi)
            }
            "semaphore" => LockObject::Semaphore(locks.semaphore(name)),
            "permit" => LockObject::Permit(locks.permit_expirable_semaphore(name)),
            "latch" => LockObject::Latch(locks.count_down_latch(name)),
            other => return Err(format!("unknown lock kind `{other}`")),
        })
    }

    fn owner(&self) -> Outcome<String> {
        match self {
            LockObject::Plain(l) => Ok(l.owner()),
            LockObject::Read(l) | LockObject::Write(l) => Ok(l.owner()),
            LockObject::Multi(l) => Ok(l.owner()),
            LockObject::Semaphore(_) | LockObject::Permit(_) | LockObject::Latch(_) => {
                Err("a semaphore or a latch has no owner".into())
            }
        }
    }

    fn semaphore(&self) -> Outcome<&Semaphore> {
        match self {
            LockObject::Semaphore(s) => Ok(s),
            _ => Err("not a semaphore".into()),
        }
    }

    fn permit(&self) -> Outcome<&PermitExpirableSemaphore> {
        match self {
            LockObject::Permit(p) => Ok(p),
            _ => Err("not a permit-expirable semaphore".into()),
        }
    }

    /// `try_set_permits`, `add_permits`, `available` on a semaphore's or a
    /// permit-expirable semaphore's count.
    fn try_set_permits(&self, permits: i64) -> Outcome<rwlock_client::Result<bool>> {
        match self {
            LockObject::Semaphore(s) => Ok(s.try_set_permits(permits)),
            other => Ok(other.permit()?.try_set_permits(permits)),
        }
    }

    fn add_permits(&self, permits: i64) -> Outcome<rwlock_client::Result<()>> {
        match self {
            LockObject::Semaphore(s) => Ok(s.add_permits(permits)),
            other => Ok(other.permit()?.add_permits(permits)),
        }
    }

    fn available_permits(&self) -> Outcome<rwlock_client::Result<i64>> {
        match self {
            LockObject::Semaphore(s) => Ok(s.available_permits()),
            other => Ok(other.permit()?.available_permits()),
        }
    }

    fn latch(&self) -> Outcome<&CountDownLatch> {
        match self {
            LockObject::Latch(l) => Ok(l),
            _ => Err("not a latch".into()),
        }
    }

    /// A lock's own calls: none of a semaphore's or a latch's.
    fn not_a_lock<T>(&self) -> rwlock_client::Result<T> {
        Err(Error::InvalidArgument("a semaphore or a latch is no lock"))
    }

    /// An acquisition: `wait` None waits without limit, 0 tries once;
    /// `lease` None leaves the hold to the watchdog.
    fn acquire(&self, wait: Option<u64>, lease: Option<u64>) -> rwlock_client::Result<Guard> {
        let lease = lease.map(Duration::from_millis);
        let wait = wait.map(Duration::from_millis);
        match self {
            LockObject::Plain(lock) => {
                let lock = lease.map_or_else(|| lock.clone(), |l| lock.clone().with_lease(l));
                wait.map_or_else(|| lock.acquire(), |w| lock.try_acquire(w))
            }
            LockObject::Read(rw) | LockObject::Write(rw) => {
                let rw = lease.map_or_else(|| rw.clone(), |l| rw.clone().with_lease(l));
                match (self, wait) {
                    (LockObject::Read(_), None) => rw.read(),
                    (LockObject::Read(_), Some(w)) => rw.try_read(w),
                    (_, None) => rw.write(),
                    (_, Some(w)) => rw.try_write(w),
                }
            }
            LockObject::Multi(multi) => {
                let multi = lease.map_or_else(|| multi.clone(), |l| multi.clone().with_lease(l));
                wait.map_or_else(|| multi.acquire(), |w| multi.try_acquire(w))
            }
            LockObject::Semaphore(_) | LockObject::Permit(_) | LockObject::Latch(_) => {
                self.not_a_lock()
            }
        }
    }

    fn is_held(&self) -> rwlock_client::Result<bool> {
        match self {
            LockObject::Plain(l) => l.is_held(),
            LockObject::Read(l) => l.is_read_held(),
            LockObject::Write(l) => l.is_write_held(),
            LockObject::Multi(l) => l.is_held(),
            LockObject::Semaphore(_) | LockObject::Permit(_) | LockObject::Latch(_) => {
                self.not_a_lock()
            }
        }
    }

    /// A release without a guard (the runner has none left for it).
    fn unlock(&self) -> rwlock_client::Result<()> {
        match self {
            LockObject::Plain(l) => l.unlock(),
            LockObject::Read(l) => l.unlock_read(),
            LockObject::Write(l) => l.unlock_write(),
            LockObject::Multi(l) => l.unlock(),
            LockObject::Semaphore(_) | LockObject::Permit(_) | LockObject::Latch(_) => {
                self.not_a_lock()
            }
        }
    }
}

/// The contract's name of an error's kind (other errors as their text,
/// which matches none).
fn kind_of(e: &Error) -> String {
    match e {
        Error::NotAcquired { .. } => "NotAcquired".into(),
        Error::NotHeld => "NotHeld".into(),
        Error::ReleaseUnknown => "ReleaseUnknown".into(),
        Error::NotReentrant => "NotReentrant".into(),
        Error::NotSynced { .. } => "NotSynced".into(),
        other => format!("{other}"),
    }
}

/// Ok when an outcome is the expected `ok` (what `done` names) or error
/// kind; "refused" is `NotAcquired`.
fn check_kind<T>(expect: &str, done: &str, outcome: &rwlock_client::Result<T>) -> Outcome {
    let expect = if expect == "refused" {
        "NotAcquired"
    } else {
        expect
    };
    let kinds = [
        done,
        "NotAcquired",
        "NotHeld",
        "ReleaseUnknown",
        "NotReentrant",
        "NotSynced",
    ];
    if !kinds.contains(&expect) {
        return Err(format!("unknown expectation `{expect}`"));
    }
    match outcome {
        Ok(_) if expect == done => Ok(()),
        Err(e) if kind_of(e) == expect => Ok(()),
        Ok(_) => Err(format!("expected {expect}, got {done}")),
        Err(e) => Err(format!("expected {expect}, got {} ({e})", kind_of(e))),
    }
}

/// Ok when a call returned `expect`.
fn equal<T: PartialEq + std::fmt::Debug>(got: rwlock_client::Result<T>, expect: T) -> Outcome {
    match got {
        Ok(value) if value == expect => Ok(()),
        Ok(value) => Err(format!("expected {expect:?}, got {value:?}")),
        Err(e) => Err(format!("expected {expect:?}, got an error: {e}")),
    }
}

/// Ok when a call that took `took` lies within `elapsed_ms`, if given.
fn within(took: Duration, elapsed_ms: Option<(u64, u64)>) -> Outcome {
    let took = took.as_millis() as u64;
    match elapsed_ms {
        Some((lo, hi)) if took < lo || took > hi => {
            Err(format!("took {took} ms, not within [{lo}, {hi}]"))
        }
        _ => Ok(()),
    }
}

/// A semaphore's acquisition as a step runs it: `wait_ms` None waits
/// without limit (`acquire`), else `try_acquire` waits up to it; checked
/// against `expect` (refused is `None` to the library, `NotAcquired` to
/// the checks) and `elapsed_ms`. What was taken, if anything.
fn timed_take<T>(
    wait_ms: Option<u64>,
    expect: &str,
    elapsed_ms: Option<(u64, u64)>,
    acquire: impl FnOnce() -> rwlock_client::Result<T>,
    try_acquire: impl FnOnce(Duration) -> rwlock_client::Result<Option<T>>,
) -> Outcome<Option<T>> {
    let started = Instant::now();
    let outcome = match wait_ms {
        None => acquire().map(Some),
        Some(ms) => try_acquire(Duration::from_millis(ms)),
    };
    let took = started.elapsed();
    let outcome = outcome.and_then(|p| p.ok_or(Error::NotAcquired { pttl: 0 }));
    check_kind(expect, "acquired", &outcome)?;
    within(took, elapsed_ms)?;
    Ok(outcome.ok())
}

/// A `later` step under way: its index and its thread.
type Later = (usize, JoinHandle<Outcome>);

/// One scenario's state.
struct Run<'s> {
    server: &'s Server,
    conn: testkit::Conn,
    locks: HashMap<String, LockObject>,
    /// The holds taken and not yet released, per lock, the last last.
    guards: HashMap<String, Vec<Guard>>,
    /// The permits taken and not yet given back, per semaphore, the last
    /// last.
    permits: HashMap<String, Vec<Permits>>,
    /// A permit-expirable semaphore's permits taken and not released, by
    /// the name their ids were saved under (`""`: not saved).
    leased: Vec<(String, LeasedPermits)>,
    /// The ids each acquisition saved, by name: they outlive the guard.
    ids: HashMap<String, Vec<String>>,
    saved: HashMap<String, Json>,
    later: Vec<Later>,
}

impl Run<'_> {
    fn lock(&self, label: &str) -> Outcome<&LockObject> {
        self.locks
            .get(label)
            .ok_or_else(|| format!("no lock `{label}` in the scenario"))
    }

    fn last_guard(&self, label: &str) -> Outcome<Option<&Guard>> {
        self.lock(label)?;
        Ok(self.guards.get(label).and_then(|g| g.last()))
    }

    /// `arg` with every `$owner(L)` and `$v` replaced.
    fn substitute(&self, arg: &str) -> Outcome<String> {
        let re = Regex::new(r"\$owner\(([^)]*)\)|\$([A-Za-z_][A-Za-z0-9_]*)").expect("regex");
        let mut failure = None;
        let out = re.replace_all(arg, |caps: &regex::Captures| {
            let value = match (caps.get(1), caps.get(2)) {
                (Some(lock), _) => self.lock(lock.as_str()).and_then(LockObject::owner),
                (_, Some(name)) => match self.saved.get(name.as_str()) {
                    Some(Json::String(s)) => Ok(s.clone()),
                    Some(Json::Number(n)) => Ok(n.to_string()),
                    Some(other) => Err(format!("${} is {other}, no string", name.as_str())),
                    None => Err(format!("nothing saved as ${}", name.as_str())),
                },
                _ => unreachable!("the regex has two alternatives"),
            };
            value.unwrap_or_else(|e| {
                failure.get_or_insert(e);
                String::new()
            })
        });
        match failure {
            Some(e) => Err(e),
            None => Ok(out.into_owned()),
        }
    }

    fn raw(&mut self, args: &[String]) -> Outcome<Reply> {
        let mut cmd = redis::cmd(args.first().ok_or("an empty command")?);
        for arg in &args[1..] {
            cmd.arg(self.substitute(arg)?);
        }
        Ok(reply_of(cmd.query(&mut self.conn)))
    }

    fn step(&mut self, index: usize, step: &Step) -> Outcome {
        match step {
            Step::Acquire {
                lock,
                wait_ms,
                lease_ms,
                expect,
                elapsed_ms,
                save_token,
            } => {
                let object = self.lock(lock)?;
                let started = Instant::now();
                let outcome = object.acquire(*wait_ms, *lease_ms);
                let took = started.elapsed();
                check_kind(expect, "acquired", &outcome)?;
                within(took, *elapsed_ms)?;
                if let Ok(guard) = outcome {
                    if let Some(name) = save_token {
                        self.saved.insert(name.clone(), Json::from(guard.token()));
                    }
                    self.guards.entry(lock.clone()).or_default().push(guard);
                } else if save_token.is_some() {
                    return Err("no token to save: nothing was acquired".into());
                }
                Ok(())
            }
            Step::Release { lock, expect } => {
                self.lock(lock)?;
                // The latest hold's guard; once none is left, the lock's own
                // release for its owner.
                let outcome = match self.guards.get_mut(lock).and_then(Vec::pop) {
                    Some(guard) => guard.release(),
                    None => self.lock(lock)?.unlock(),
                };
                check_kind(expect, "ok", &outcome)
            }
            Step::Held {
                lock,
                expect,
                within_ms,
            } => {
                let deadline = Instant::now() + Duration::from_millis(*within_ms);
                loop {
                    let held = self
                        .lock(lock)?
                        .is_held()
                        .map_err(|e| format!("is_held: {e}"))?;
                    if held == *expect {
                        return Ok(());
                    }
                    if Instant::now() >= deadline {
                        return Err(format!(
                            "held is {held}, expected {expect} (within {within_ms} ms)"
                        ));
                    }
                    thread::sleep(Duration::from_millis(10));
                }
            }
            Step::Lost {
                lock,
                expect,
                within_ms,
            } => {
                let deadline = Instant::now() + Duration::from_millis(*within_ms);
                loop {
                    let lost = self.last_guard(lock)?.is_some_and(Guard::is_lost);
                    if lost == *expect {
                        return Ok(());
                    }
                    if Instant::now() >= deadline {
                        return Err(format!(
                            "lost is {lost}, expected {expect} (within {within_ms} ms)"
                        ));
                    }
                    thread::sleep(Duration::from_millis(10));
                }
            }
            Step::Token { lock, expect } => {
                let token = Json::from(self.last_guard(lock)?.and_then(Guard::token));
                check(expect, &Ok(token), &self.saved)
            }
            Step::Redis { args, expect, save } => {
                let reply = self.raw(args)?;
                check(expect, &reply, &self.saved)?;
                if let Some(name) = save {
                    let value = reply.map_err(|e| format!("an error to save: {e}"))?;
                    self.saved.insert(name.clone(), value);
                }
                Ok(())
            }
            Step::Later {
                after_ms,
                args,
                expect,
            } => {
                let args = args
                    .iter()
                    .map(|a| self.substitute(a))
                    .collect::<Outcome<Vec<_>>>()?;
                let (address, expect, saved) =
                    (self.server.address(), expect.clone(), self.saved.clone());
                let after = Duration::from_millis(*after_ms);
                let thread = thread::spawn(move || {
                    let mut conn = testkit::Conn::open(&address, RAW_TIMEOUT)
                        .map_err(|e| format!("connect: {e}"))?;
                    thread::sleep(after);
                    let mut cmd = redis::cmd(&args[0]);
                    for arg in &args[1..] {
                        cmd.arg(arg);
                    }
                    check(&expect, &reply_of(cmd.query(&mut conn)), &saved)
                });
                self.later.push((index, thread));
                Ok(())
            }
            Step::Sleep(ms) => {
                thread::sleep(Duration::from_millis(*ms));
                Ok(())
            }
            Step::Calls(expected) => {
                let calls = command_calls(&mut self.conn)?;
                for (command, expect) in expected {
                    let count = calls.get(command).copied().unwrap_or(0);
                    check(expect, &Ok(Json::from(count)), &self.saved)
                        .map_err(|e| format!("{command}: {e}"))?;
                }
                Ok(())
            }
            Step::ResetCalls => {
                let reply = self.raw(&["CONFIG".into(), "RESETSTAT".into()])?;
                check(&Json::from("OK"), &reply, &self.saved)
            }
            Step::Take {
                semaphore,
                permits,
                wait_ms,
                expect,
                elapsed_ms,
            } => {
                let object = self.lock(semaphore)?.semaphore()?;
                let outcome = timed_take(
                    *wait_ms,
                    expect,
                    *elapsed_ms,
                    || object.acquire(*permits),
                    |wait| object.try_acquire(*permits, wait),
                )?;
                if let Some(taken) = outcome {
                    self.permits
                        .entry(semaphore.clone())
                        .or_default()
                        .push(taken);
                }
                Ok(())
            }
            Step::GiveBack {
                semaphore,
                permits,
                expect,
            } => {
                // The latest permits' guard when it holds as many; else a
                // release of its own (anyone may give permits back).
                let held = self.permits.entry(semaphore.clone()).or_default();
                let latest = match held.last().map(Permits::permits) {
                    Some(n) if n == *permits => held.pop(),
                    _ => None,
                };
                let outcome = match latest {
                    Some(taken) => taken.release(),
                    None => self.lock(semaphore)?.semaphore()?.release(*permits),
                };
                check_kind(expect, "ok", &outcome)
            }
            Step::TrySetPermits {
                semaphore,
                permits,
                expect,
            } => {
                let set = self.lock(semaphore)?.try_set_permits(*permits)?;
                equal(set, *expect)
            }
            Step::AddPermits { semaphore, permits } => self
                .lock(semaphore)?
                .add_permits(*permits)?
                .map_err(|e| format!("add_permits: {e}")),
            Step::Available { semaphore, expect } => {
                let n = self.lock(semaphore)?.available_permits()?;
                self.integer_is(n, expect)
            }
            Step::TakeIds {
                permit,
                permits,
                lease_ms,
                wait_ms,
                expect,
                elapsed_ms,
                save_ids,
            } => {
                let object = self.lock(permit)?.permit()?.clone();
                let object = match lease_ms {
                    None => object,
                    Some(-1) => object.never_expiring(),
                    Some(ms) => {
                        let ms = u64::try_from(*ms).map_err(|_| format!("lease_ms {ms}"))?;
                        object.with_lease(Duration::from_millis(ms))
                    }
                };
                let outcome = timed_take(
                    *wait_ms,
                    expect,
                    *elapsed_ms,
                    || object.acquire(*permits),
                    |wait| object.try_acquire(*permits, wait),
                )?;
                match (outcome, save_ids) {
                    (Some(taken), name) => {
                        let name = name.clone().unwrap_or_default();
                        if taken.ids().len() as u64 != *permits {
                            return Err(format!("{} ids for {permits} permits", taken.ids().len()));
                        }
                        self.ids.insert(name.clone(), taken.ids().to_vec());
                        self.leased.push((name, taken));
                        Ok(())
                    }
                    (None, Some(_)) => Err("no ids to save: nothing was acquired".into()),
                    (None, None) => Ok(()),
                }
            }
            Step::ReleaseIds {
                permit,
                ids,
                expect,
            } => {
                // The guard of the permits saved under `ids` while it is
                // left; else a release of the ids of its own.
                let at = self.leased.iter().position(|(name, _)| name == ids);
                let outcome = match at {
                    Some(at) => self.leased.remove(at).1.release(),
                    None => {
                        let saved = self.saved_ids(ids)?.to_vec();
                        self.lock(permit)?.permit()?.release(&saved)
                    }
                };
                check_kind(expect, "ok", &outcome)
            }
            Step::UpdateLease {
                permit,
                ids,
                lease_ms,
                expect,
            } => {
                let id = self.saved_id(ids)?;
                let lease = u64::try_from(*lease_ms).ok().map(Duration::from_millis);
                let updated = self.lock(permit)?.permit()?.update_lease_time(&id, lease);
                equal(updated, *expect)
            }
            Step::LeaseLeft {
                permit,
                ids,
                expect,
            } => {
                let id = self.saved_id(ids)?;
                let left = match self.lock(permit)?.permit()?.lease_time(&id) {
                    Ok(Some(left)) => Ok(left.as_millis() as i64),
                    Ok(None) => Ok(-1),
                    Err(Error::NotHeld) => Ok(0),
                    Err(e) => Err(e),
                };
                self.integer_is(left, expect)
            }
            Step::Acquired { permit, expect } => {
                let n = self.lock(permit)?.permit()?.acquired_permits();
                self.integer_is(n, expect)
            }
            Step::Drain { semaphore, expect } => {
                let n = self.lock(semaphore)?.semaphore()?.drain_permits();
                self.integer_is(n, expect)
            }
            Step::TrySetCount {
                latch,
                count,
                expect,
            } => equal(self.lock(latch)?.latch()?.try_set_count(*count), *expect),
            Step::CountDown { latch } => self
                .lock(latch)?
                .latch()?
                .count_down()
                .map_err(|e| format!("count_down: {e}")),
            Step::Count { latch, expect } => {
                let n = self.lock(latch)?.latch()?.count();
                self.integer_is(n, expect)
            }
            Step::Await {
                latch,
                wait_ms,
                expect,
                elapsed_ms,
            } => {
                let object = self.lock(latch)?.latch()?;
                let started = Instant::now();
                let reached = match wait_ms {
                    None => object.wait().map(|()| true),
                    Some(ms) => object.wait_timeout(Duration::from_millis(*ms)),
                };
                let took = started.elapsed();
                equal(reached, *expect)?;
                within(took, *elapsed_ms)
            }
            Step::Delete { latch, expect } => equal(self.lock(latch)?.latch()?.delete(), *expect),
        }
    }

    /// The ids an acquisition saved under `name`.
    fn saved_ids(&self, name: &str) -> Outcome<&[String]> {
        self.ids
            .get(name)
            .map(Vec::as_slice)
            .ok_or_else(|| format!("no ids saved as `{name}`"))
    }

    /// The one id saved under `name`.
    fn saved_id(&self, name: &str) -> Outcome<String> {
        match self.saved_ids(name)? {
            [id] => Ok(id.clone()),
            many => Err(format!("`{name}` holds {} ids, not one", many.len())),
        }
    }

    /// Ok when a call's integer is what `expect` says.
    fn integer_is(&self, got: rwlock_client::Result<i64>, expect: &Json) -> Outcome {
        let got = got.map_err(|e| format!("an error: {e}"))?;
        check(expect, &Ok(Json::from(got)), &self.saved)
    }

    /// Waits for the `later` steps; the first that failed.
    fn join_later(&mut self) -> Outcome {
        let mut first = Ok(());
        for (index, thread) in self.later.drain(..) {
            let outcome = thread
                .join()
                .unwrap_or_else(|_| Err("its thread panicked".into()));
            if let (Err(e), Ok(())) = (outcome, &first) {
                first = Err(format!("step {index} (later): {e}"));
            }
        }
        first
    }
}

/// Runs one scenario on `server`: Err names the step that failed.
fn run(server: &Server, scenario: &Scenario) -> Outcome {
    let mut conn =
        testkit::Conn::open(&server.address(), RAW_TIMEOUT).map_err(|e| format!("connect: {e}"))?;
    for reset in [&["FLUSHALL"][..], &["CONFIG", "RESETSTAT"]] {
        let _: () = redis::cmd(reset[0])
            .arg(&reset[1..])
            .query(&mut conn)
            .map_err(|e| format!("{reset:?}: {e}"))?;
    }
    let clients: HashMap<&str, Client> = scenario
        .clients
        .iter()
        .map(|(name, options)| {
            let locks = Client::new(server.client()).with_options(options.clone());
            (name.as_str(), locks)
        })
        .collect();
    let mut read_write = HashMap::new();
    let mut locks = HashMap::new();
    for (label, spec) in &scenario.locks {
        let client = clients
            .get(spec.client.as_str())
            .ok_or_else(|| format!("lock {label}: no client `{}`", spec.client))?;
        let object = LockObject::make(spec, client, &mut read_write)
            .map_err(|e| format!("lock {label}: {e}"))?;
        locks.insert(label.clone(), object);
    }
    let mut run = Run {
        server,
        conn,
        locks,
        guards: HashMap::new(),
        permits: HashMap::new(),
        leased: Vec::new(),
        ids: HashMap::new(),
        saved: HashMap::new(),
        later: Vec::new(),
    };
    let steps = scenario
        .steps
        .iter()
        .enumerate()
        .try_for_each(|(i, step)| run.step(i, step).map_err(|e| format!("step {i}: {e}")));
    let later = run.join_later();
    // What is still held is released (or, lost, left) as the guards drop.
    drop(run);
    steps.and(later)
}

fn scenario_file() -> PathBuf {
    std::env::var_os("RWLOCK_SCENARIOS")
        .map(PathBuf::from)
        .unwrap_or_else(|| workspace_root().join("clients/contract/scenarios.json"))
}

#[test]
fn every_shared_scenario_holds_for_the_blocking_client() {
    let path = scenario_file();
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("read the scenarios {}: {e}", path.display()));
    let file: Json = serde_json::from_str(&text)
        .unwrap_or_else(|e| panic!("the scenarios {} are no JSON: {e}", path.display()));
    let all = scenarios(&file).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(!all.is_empty(), "{} holds no scenario", path.display());
    let server = Server::start(&[]);
    let mut failures = Vec::new();
    for (i, scenario) in all.iter().enumerate() {
        let started = Instant::now();
        let outcome = scenario
            .as_ref()
            .map_err(Clone::clone)
            .and_then(|s| run(&server, s).map_err(|e| format!("{}: {e}", s.name)));
        let verdict = if outcome.is_ok() { "ok" } else { "FAILED" };
        let name = scenario
            .as_ref()
            .map_or("(unreadable)", |s| s.name.as_str());
        eprintln!("scenario {i} {verdict} in {:?}: {name}", started.elapsed());
        if let Err(e) = outcome {
            failures.push(format!("scenario {i}: {e}"));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} shared scenarios failed:\n{}",
        failures.len(),
        all.len(),
        failures.join("\n")
    );
}

#[test]
fn the_runner_refuses_what_it_does_not_know() {
    let read = |text: &str| scenario(&serde_json::from_str(text).expect("json"));
    let base = r#""name": "n", "clients": {"A": {}}, "locks": {"a": {"client": "A", "kind": "plain", "name": "x"}}"#;
    assert!(read(&format!(r#"{{{base}, "steps": [{{"sleep_ms": 1}}]}}"#)).is_ok());
    let refused = [
        (r#"{"dance": 1}"#, "exactly one action"),
        (
            r#"{"sleep_ms": 1, "held": "a", "expect": true}"#,
            "exactly one action",
        ),
        (
            r#"{"release": "a", "expect": "ok", "quietly": true}"#,
            "unknown fields",
        ),
        (
            r#"{"acquire": "a", "wait_ms": 0, "expect": "acquired"}"#,
            "`lease_ms` is missing",
        ),
        (
            r#"{"later": {"after_ms": 1, "redis": ["PING"], "expect": "PONG", "x": 1}}"#,
            "unknown fields",
        ),
        (r#"{"reset_calls": false}"#, "true expected"),
    ];
    for (step, why) in refused {
        let e = read(&format!(r#"{{{base}, "steps": [{step}]}}"#))
            .err()
            .unwrap_or_else(|| panic!("{step} was accepted"));
        assert!(e.contains(why), "{step}: {e}");
    }
    let counted = r#""name": "n", "clients": {"A": {}}, "locks": {"s": {"client": "A", "kind": "semaphore", "name": "x"}, "l": {"client": "A", "kind": "latch", "name": "y"}}"#;
    let ok = [
        r#"{"acquire": "s", "permits": 2, "wait_ms": 0, "expect": "acquired"}"#,
        r#"{"try_set_count": "l", "count": 2, "expect": true}"#,
        r#"{"count": "l", "expect": 2}"#,
    ];
    for step in ok {
        let read = read(&format!(r#"{{{counted}, "steps": [{step}]}}"#));
        assert!(read.is_ok(), "{step}: {:?}", read.err());
    }
    let refused = [
        (
            r#"{"acquire": "s", "wait_ms": 0, "lease_ms": 9, "expect": "acquired"}"#,
            "unknown fields",
        ),
        (r#"{"count_down": "s"}"#, "not a latch"),
        (r#"{"drain": "l", "expect": 0}"#, "not a semaphore"),
        (r#"{"await": "l", "expect": true}"#, "`wait_ms` is missing"),
        (r#"{"count": "nobody", "expect": 0}"#, "no lock `nobody`"),
    ];
    for (step, why) in refused {
        let e = read(&format!(r#"{{{counted}, "steps": [{step}]}}"#))
            .err()
            .unwrap_or_else(|| panic!("{step} was accepted"));
        assert!(e.contains(why), "{step}: {e}");
    }
    let e = read(r#"{"name": "n", "clients": {"A": {"retries": 3}}, "locks": {}, "steps": []}"#)
        .err()
        .expect("an unknown client option");
    assert!(e.contains("unknown fields"), "{e}");
    let e = read(r#"{"name": "n", "clients": {}, "locks": {}, "steps": [], "extra": 1}"#)
        .err()
        .expect("an unknown scenario field");
    assert!(e.contains("unknown fields"), "{e}");
    let e = check(
        &serde_json::json!({"close_to": 3}),
        &Ok(Json::from(3)),
        &HashMap::new(),
    );
    assert!(e.is_err_and(|e| e.contains("unknown expectation")));
    assert!(check_kind::<()>("Sideways", "ok", &Ok(())).is_err());
}

#[test]
fn expectations_match_as_the_readme_says() {
    let saved: HashMap<String, Json> = [("t".to_string(), Json::from(5))].into();
    let ok = |expect: Json, got: Reply| check(&expect, &got, &saved).is_ok();
    use serde_json::json;
    assert!(ok(json!(null), Ok(Json::Null)));
    assert!(ok(json!("1"), Ok(json!("1"))));
    assert!(!ok(json!(1), Ok(json!("1"))), "a number is no string");
    assert!(ok(json!({"between": [1, 3]}), Ok(json!(3))));
    assert!(!ok(json!({"between": [1, 3]}), Ok(json!(4))));
    assert!(
        !ok(json!({"between": [1, 3]}), Ok(json!("2"))),
        "integers only"
    );
    assert!(ok(json!({"match": "a+b"}), Ok(json!("aab"))));
    assert!(
        !ok(json!({"match": "a+b"}), Ok(json!("aabc"))),
        "anchored at the end"
    );
    assert!(
        !ok(json!({"match": "a|b"}), Ok(json!("ab"))),
        "anchored around alternatives"
    );
    assert!(ok(json!({"each_match": "k:.*"}), Ok(json!(["k:1", "k:2"]))));
    assert!(!ok(json!({"each_match": "k:.*"}), Ok(json!(["k:1", "x"]))));
    assert!(ok(json!({"len": 0}), Ok(json!([]))));
    assert!(
        ok(json!({"eq": "$t"}), Ok(json!("5"))),
        "GET's string of an integer"
    );
    assert!(ok(json!({"gt": "$t"}), Ok(json!(6))));
    assert!(!ok(json!({"gt": "$t"}), Ok(json!(5))));
    assert!(check(&json!({"eq": "$nothing"}), &Ok(json!(5)), &saved).is_err());
    assert!(ok(
        json!({"error": "ERR"}),
        Err("ERR unknown command".into())
    ));
    assert!(!ok(json!({"error": "WRONGTYPE"}), Err("ERR x".into())));
    assert!(
        !ok(json!("OK"), Err("ERR x".into())),
        "an error is no reply"
    );
    assert!(check_kind(
        "refused",
        "acquired",
        &Err::<(), _>(Error::NotAcquired { pttl: 1 })
    )
    .is_ok());
    assert!(check_kind("NotHeld", "ok", &Err::<(), _>(Error::NotHeld)).is_ok());
    assert!(check_kind("ok", "ok", &Err::<(), _>(Error::NotHeld)).is_err());
}
