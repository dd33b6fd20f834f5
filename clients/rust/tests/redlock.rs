//! RedLock against five independent servers: with two stopped a majority
//! still grants it; with three stopped it is refused and nothing is left
//! held on the others. Blocking and async.

use std::time::{Duration, Instant};

use rwlock_client::{aio, Error, RedLock};
use testkit::{all_keys, Server};

/// The clock drift a RedLock allows for a 10 s lease: 1% of it + 2 ms.
const DRIFT: Duration = Duration::from_millis(102);

fn five() -> Vec<Server> {
    (0..5).map(|_| Server::start(&[])).collect()
}

fn clients(servers: &[Server]) -> Vec<redis::Client> {
    servers.iter().map(|s| s.client()).collect()
}

/// How many running servers hold the key `name`.
fn holders(servers: &mut [Server], name: &str) -> usize {
    servers
        .iter_mut()
        .filter_map(|s| if s.is_running() { Some(s.conn()) } else { None })
        .map(|mut conn| -> bool {
            redis::cmd("EXISTS")
                .arg(name)
                .query(&mut conn)
                .expect("EXISTS")
        })
        .filter(|held| *held)
        .count()
}

/// Asserts a refusal for want of a majority of five, `acquired` granting.
fn no_quorum<T: std::fmt::Debug>(refused: Result<T, Error>, acquired: usize) {
    assert!(
        matches!(refused, Err(Error::NoQuorum { acquired: a, quorum: 3 }) if a == acquired),
        "{refused:?}"
    );
}

#[test]
fn a_majority_grants_the_lock_a_minority_does_not() {
    let mut servers = five();
    let lease = Duration::from_secs(10);
    let lock = RedLock::new(clients(&servers), "red").with_lease(lease);
    {
        let began = Instant::now();
        let held = lock.try_acquire(Duration::ZERO).expect("all five up");
        // The lease less the drift (1% + 2 ms) and the time the round took,
        // however long a loaded machine made it: twice, as the validity
        // (lease - round - drift) is counted from the round's start.
        assert!(held.validity() + 2 * began.elapsed() + DRIFT >= lease);
        assert_eq!(holders(&mut servers, "red"), 5);
        let rival = RedLock::new(clients(&servers), "red");
        no_quorum(rival.try_acquire(Duration::from_millis(300)), 0);
    }
    assert_eq!(holders(&mut servers, "red"), 0, "released on all");

    servers[0].stop();
    servers[1].stop();
    {
        let held = lock.try_acquire(Duration::ZERO).expect("three of five");
        assert!(held.validity() > Duration::ZERO);
        assert_eq!(holders(&mut servers, "red"), 3);
    }
    assert_eq!(holders(&mut servers, "red"), 0);

    servers[2].stop();
    no_quorum(lock.try_acquire(Duration::from_millis(300)), 2);
    for s in servers.iter_mut() {
        if s.is_running() {
            assert!(all_keys(&mut s.conn()).is_empty(), "nothing left held");
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_redlock_acquires_with_two_stopped_and_refuses_with_three() {
    let mut servers = five();
    let lock =
        aio::RedLock::new(clients(&servers), "red-async").with_lease(Duration::from_secs(10));
    servers[3].stop();
    servers[4].stop();
    let began = Instant::now();
    let held = lock
        .try_acquire(Duration::ZERO)
        .await
        .expect("three of five");
    assert!(held.validity() + 2 * began.elapsed() + DRIFT >= Duration::from_secs(10));
    assert_eq!(holders(&mut servers, "red-async"), 3);
    let rival = aio::RedLock::new(clients(&servers), "red-async");
    no_quorum(rival.try_acquire(Duration::from_millis(300)).await, 0);
    held.release().await;
    assert_eq!(holders(&mut servers, "red-async"), 0);

    servers[2].stop();
    no_quorum(lock.try_acquire(Duration::from_millis(300)).await, 2);
    assert_eq!(holders(&mut servers, "red-async"), 0, "nothing left held");
}
