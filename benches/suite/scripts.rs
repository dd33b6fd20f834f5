//! Redisson's scripts, read at run time and loaded into the server's script
//! cache for EVALSHA: the seed scripts of the read-write lock from
//! `$RWLOCK_REDISSON_LUA`, and Redisson 4.7's plain-lock scripts from
//! `$RWLOCK_REDISSON_LOCK_LUA`.

use crate::resp::Conn;

pub struct Scripts {
    pub read_lock: String,
    pub read_unlock: String,
    pub write_lock: String,
    pub write_unlock: String,
    /// None when `$RWLOCK_REDISSON_LOCK_LUA` names no directory.
    pub plain: Option<PlainScripts>,
}

/// `RLock`'s and `RFencedLock`'s scripts (Redisson 4.7).
pub struct PlainScripts {
    pub lock: String,
    pub fenced_lock: String,
    /// Redisson's unlock: the release with its unlock latch.
    pub unlock: String,
}

fn load(conn: &mut Conn, var: &str, name: &str) -> String {
    conn.send(&crate::resp::command(&[
        "SCRIPT",
        "LOAD",
        &testkit::lua_script_of(var, name),
    ]));
    String::from_utf8(conn.recv_bulk()).expect("a SHA1 in hex")
}

impl Scripts {
    /// None when `$RWLOCK_REDISSON_LUA` does not name the scripts' directory.
    pub fn load(port: u16) -> Option<Scripts> {
        testkit::lua_dir()?;
        let mut conn = Conn::connect(port);
        let mut seed = |name| load(&mut conn, testkit::SEED_LUA, name);
        let (read_lock, read_unlock) = (seed("read_lock"), seed("read_unlock"));
        let (write_lock, write_unlock) = (seed("write_lock"), seed("write_unlock"));
        let plain = testkit::lua_dir_of(testkit::LOCK_LUA).map(|_| {
            let mut plain = |name| load(&mut conn, testkit::LOCK_LUA, name);
            PlainScripts {
                lock: plain("lock"),
                fenced_lock: plain("fenced_lock"),
                unlock: plain("unlock"),
            }
        });
        Some(Scripts {
            read_lock,
            read_unlock,
            write_lock,
            write_unlock,
            plain,
        })
    }

    /// The plain-lock scripts; exits naming the variable when they are missing.
    pub fn plain(&self) -> &PlainScripts {
        self.plain.as_ref().unwrap_or_else(|| {
            eprintln!(
                "{} must name the directory of Redisson 4.7's plain-lock scripts",
                testkit::LOCK_LUA
            );
            std::process::exit(2)
        })
    }
}
