//! Owners in Redisson's format, `<client UUID>:<thread id>`: a hold belongs
//! to one thread of one client, so the thread re-enters it, and a Java
//! service on Redisson sharing the lock sees an ordinary holder.

use std::cell::Cell;
use std::sync::atomic::{AtomicU64, Ordering};

static NEXT_THREAD: AtomicU64 = AtomicU64::new(1);

thread_local! {
    // Redisson uses the JVM's thread id; any number unique in the process
    // does, as each client has its own UUID.
    static THREAD_ID: Cell<u64> = const { Cell::new(0) };
}

/// A number unique to the calling thread in this process.
pub fn thread_id() -> u64 {
    THREAD_ID.with(|id| {
        if id.get() == 0 {
            id.set(NEXT_THREAD.fetch_add(1, Ordering::Relaxed));
        }
        id.get()
    })
}

/// A number not given to any thread, for an owner that is not a thread's
/// (an async lock handle's).
pub fn fresh_id() -> u64 {
    NEXT_THREAD.fetch_add(1, Ordering::Relaxed)
}

/// A new client id: a random UUID, as `Redisson.create()` takes.
pub fn new_client_id() -> String {
    uuid::Uuid::new_v4().to_string()
}

/// `<client id>:<id>`.
pub fn owner(client_id: &str, id: u64) -> String {
    format!("{client_id}:{id}")
}
