//! Redisson's seed scripts, read at run time from `$RWLOCK_REDISSON_LUA` and
//! loaded into the server's script cache for EVALSHA.

use crate::resp::Conn;

pub struct Scripts {
    pub read_lock: String,
    pub read_unlock: String,
    pub write_lock: String,
    pub write_unlock: String,
}

fn load(conn: &mut Conn, name: &str) -> String {
    conn.send(&crate::resp::command(&[
        "SCRIPT",
        "LOAD",
        &testkit::lua_script(name),
    ]));
    String::from_utf8(conn.recv_bulk()).expect("a SHA1 in hex")
}

impl Scripts {
    /// None when `$RWLOCK_REDISSON_LUA` does not name the scripts' directory.
    pub fn load(port: u16) -> Option<Scripts> {
        testkit::lua_dir()?;
        let mut conn = Conn::connect(port);
        Some(Scripts {
            read_lock: load(&mut conn, "read_lock"),
            read_unlock: load(&mut conn, "read_unlock"),
            write_lock: load(&mut conn, "write_lock"),
            write_unlock: load(&mut conn, "write_unlock"),
        })
    }
}
