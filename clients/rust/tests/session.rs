//! Session holds (`SESSION`): bound to the guard's own connection, kept by
//! the server past their lease with no watchdog, released with the guard,
//! and released by the server when the connection closes. Blocking and
//! async, each kind of lock and the multi-lock. The flag must be in the
//! module under test: on one without it these tests fail.

use std::thread;
use std::time::Duration;

use rwlock_client::{aio, Client, Options};
use testkit::{all_keys, query, rwlock_counter, wait_until, Server};

/// A lease of 1 s: a hold the server did not keep would be gone after it.
fn one_second() -> Options {
    Options {
        watchdog_timeout: Duration::from_secs(1),
        ..Options::default()
    }
}

fn exists(conn: &mut testkit::Conn, key: &str) -> bool {
    query(conn, &["EXISTS", key])
}

#[test]
fn session_holds_live_with_their_connection() {
    let (server, mut conn) = Server::started(&[]);
    let locks = Client::new(server.client()).with_options(one_second());
    let plain = locks
        .lock("s:lock")
        .with_session()
        .acquire()
        .expect("session lock");
    let write = locks
        .read_write_lock("s:rw")
        .with_session()
        .write()
        .expect("session write");
    let read = locks
        .read_write_lock("s:read")
        .with_session()
        .read()
        .expect("session read");
    // Held past the 1 s lease with no watchdog: the server keeps them.
    thread::sleep(Duration::from_millis(2_500));
    for key in ["s:lock", "s:rw", "s:read"] {
        assert!(exists(&mut conn, key), "{key} kept by the server");
    }
    assert!(!plain.is_lost() && !write.is_lost() && !read.is_lost());
    assert_eq!(
        rwlock_counter(&mut conn, "renewals_not_held"),
        0,
        "no watchdog ran"
    );
    // Released with the guard as any hold.
    write.release().expect("release");
    assert!(!exists(&mut conn, "s:rw"));
    // Their connections closed (killed), the server releases them.
    let _: i64 = query(&mut conn, &["CLIENT", "KILL", "SKIPME", "yes"]);
    wait_until(Duration::from_secs(5), "the session holds released", || {
        all_keys(&mut conn)
            .iter()
            .all(|k| !k.starts_with("s:"))
            .then_some(())
    });
    drop((plain, read));
}

#[test]
fn a_session_multi_lock() {
    let (server, mut conn) = Server::started(&[]);
    let locks = Client::new(server.client()).with_options(one_second());
    let multi = locks
        .multi_lock()
        .lock("sm:a")
        .write("sm:b")
        .with_session()
        .acquire()
        .expect("session multi-lock");
    thread::sleep(Duration::from_millis(2_000));
    assert!(
        exists(&mut conn, "sm:a") && exists(&mut conn, "sm:b"),
        "kept"
    );
    drop(multi);
    assert!(
        !exists(&mut conn, "sm:a") && !exists(&mut conn, "sm:b"),
        "released"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn async_session_holds() {
    let (server, mut conn) = Server::started(&[]);
    let locks = aio::Client::new(server.client()).with_options(one_second());
    let session = locks
        .lock("as:lock")
        .with_session()
        .acquire()
        .await
        .expect("session");
    let write = locks
        .read_write_lock("as:rw")
        .with_session()
        .write()
        .await
        .expect("session write");
    tokio::time::sleep(Duration::from_millis(2_000)).await;
    assert!(
        exists(&mut conn, "as:lock") && exists(&mut conn, "as:rw"),
        "kept"
    );
    write.release().await.expect("release");
    drop(session);
    wait_until(Duration::from_secs(5), "released on drop", || {
        (!exists(&mut conn, "as:lock")).then_some(())
    });
}
