//! A minimal RESP2 client for the load generators: requests are encoded once,
//! replies are parsed only as far as the checks need, no allocation per reply.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::time::Duration;

/// One request, encoded: a command or a whole MULTI/EXEC.
pub fn command<A: AsRef<[u8]>>(args: &[A]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for a in args {
        let a = a.as_ref();
        out.extend_from_slice(format!("${}\r\n", a.len()).as_bytes());
        out.extend_from_slice(a);
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// What a reply was, as far as a benchmark checks it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Reply {
    Nil,
    Int(i64),
    Status,
    Bulk,
    /// An array; `error` when any element (at any depth) is an error.
    Array {
        error: bool,
    },
    Error(String),
}

/// What a benchmark expects of one reply.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Expect {
    Nil,
    Int(i64),
    /// Anything but an error (also inside arrays).
    NoError,
}

impl Expect {
    pub fn check(self, reply: &Reply) -> Result<(), String> {
        let ok = match (self, reply) {
            (Expect::Nil, Reply::Nil) => true,
            (Expect::Int(want), Reply::Int(got)) => want == *got,
            (Expect::NoError, Reply::Error(_)) => false,
            (Expect::NoError, Reply::Array { error }) => !error,
            (Expect::NoError, _) => true,
            _ => false,
        };
        if ok {
            Ok(())
        } else {
            Err(format!("expected {self:?}, got {reply:?}"))
        }
    }

    /// Panics, naming `what`, unless `reply` is as expected.
    pub fn require(self, reply: &Reply, what: &str) {
        if let Err(e) = self.check(reply) {
            panic!("{what}: {e}");
        }
    }
}

fn line(buf: &[u8], from: usize) -> Option<(&[u8], usize)> {
    let len = buf.get(from..)?.iter().position(|&b| b == b'\n')?;
    let end = from + len;
    let text = buf[from..end]
        .strip_suffix(b"\r")
        .unwrap_or(&buf[from..end]);
    Some((text, end + 1))
}

fn number(text: &[u8]) -> Result<i64, String> {
    std::str::from_utf8(text)
        .ok()
        .and_then(|s| s.parse().ok())
        .ok_or_else(|| format!("bad number {:?}", text.escape_ascii().to_string()))
}

/// Parses one reply starting at `from`: None when it is not complete yet,
/// else the reply and where the next one starts.
pub fn parse(buf: &[u8], from: usize) -> Result<Option<(Reply, usize)>, String> {
    let Some((head, next)) = line(buf, from) else {
        return Ok(None);
    };
    let (kind, rest) = head.split_first().ok_or("empty reply line")?;
    match kind {
        b'+' => Ok(Some((Reply::Status, next))),
        b'-' => Ok(Some((
            Reply::Error(String::from_utf8_lossy(rest).into_owned()),
            next,
        ))),
        b':' => Ok(Some((Reply::Int(number(rest)?), next))),
        b'$' => {
            let len = number(rest)?;
            if len < 0 {
                return Ok(Some((Reply::Nil, next)));
            }
            let end = next + len as usize + 2;
            Ok((buf.len() >= end).then_some((Reply::Bulk, end)))
        }
        b'*' => {
            let len = number(rest)?;
            if len < 0 {
                return Ok(Some((Reply::Nil, next)));
            }
            let mut at = next;
            let mut error = false;
            for _ in 0..len {
                match parse(buf, at)? {
                    None => return Ok(None),
                    Some((reply, after)) => {
                        error |= matches!(reply, Reply::Error(_) | Reply::Array { error: true });
                        at = after;
                    }
                }
            }
            Ok(Some((Reply::Array { error }, at)))
        }
        other => Err(format!("unknown reply type {:?}", *other as char)),
    }
}

/// A reply decoded in full, for the few places that need its contents.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Value {
    Nil,
    Int(i64),
    Status(String),
    Bulk(Vec<u8>),
    Array(Vec<Value>),
    Error(String),
}

/// Decodes one reply starting at `from`, like `parse`.
fn decode(buf: &[u8], from: usize) -> Result<Option<(Value, usize)>, String> {
    let Some((head, next)) = line(buf, from) else {
        return Ok(None);
    };
    let (kind, rest) = head.split_first().ok_or("empty reply line")?;
    let text = || String::from_utf8_lossy(rest).into_owned();
    match kind {
        b'+' => Ok(Some((Value::Status(text()), next))),
        b'-' => Ok(Some((Value::Error(text()), next))),
        b':' => Ok(Some((Value::Int(number(rest)?), next))),
        b'$' | b'*' if number(rest)? < 0 => Ok(Some((Value::Nil, next))),
        b'$' => {
            let end = next + number(rest)? as usize;
            Ok((buf.len() >= end + 2).then(|| (Value::Bulk(buf[next..end].to_vec()), end + 2)))
        }
        b'*' => {
            let mut items = Vec::new();
            let mut at = next;
            for _ in 0..number(rest)? {
                match decode(buf, at)? {
                    None => return Ok(None),
                    Some((item, after)) => {
                        items.push(item);
                        at = after;
                    }
                }
            }
            Ok(Some((Value::Array(items), at)))
        }
        other => Err(format!("unknown reply type {:?}", *other as char)),
    }
}

/// A blocking connection with its own read buffer.
pub struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    start: usize,
}

impl Conn {
    pub fn connect(port: u16) -> Conn {
        let stream = TcpStream::connect(("127.0.0.1", port)).expect("connect to redis-server");
        stream.set_nodelay(true).expect("TCP_NODELAY");
        stream
            .set_read_timeout(Some(Duration::from_secs(30)))
            .expect("read timeout");
        Conn {
            stream,
            buf: Vec::with_capacity(1 << 16),
            start: 0,
        }
    }

    pub fn send(&mut self, bytes: &[u8]) {
        self.stream.write_all(bytes).expect("write to redis-server");
    }

    /// The next reply, waiting for it.
    pub fn recv(&mut self) -> Reply {
        loop {
            match parse(&self.buf, self.start).expect("RESP from redis-server") {
                Some((reply, next)) => {
                    self.start = next;
                    if self.start == self.buf.len() {
                        self.buf.clear();
                        self.start = 0;
                    }
                    return reply;
                }
                None => self.fill(),
            }
        }
    }

    /// The next reply, decoded in full.
    pub fn recv_value(&mut self) -> Value {
        loop {
            match decode(&self.buf, self.start).expect("RESP from redis-server") {
                Some((value, next)) => {
                    self.start = next;
                    return value;
                }
                None => self.fill(),
            }
        }
    }

    /// The next reply as a bulk string's bytes (for INFO and the like).
    pub fn recv_bulk(&mut self) -> Vec<u8> {
        loop {
            if let Some((head, next)) = line(&self.buf, self.start) {
                let len = match head.split_first() {
                    Some((b'$', n)) => number(n).expect("bulk length"),
                    _ => panic!(
                        "expected a bulk reply, got {:?}",
                        head.escape_ascii().to_string()
                    ),
                };
                let end = next + len.max(0) as usize;
                if self.buf.len() >= end + 2 {
                    let body = self.buf[next..end].to_vec();
                    self.start = end + 2;
                    return body;
                }
            }
            self.fill();
        }
    }

    /// A number from `INFO section`: the value of its line `field:`.
    pub fn info_number<T: std::str::FromStr>(&mut self, section: &str, field: &str) -> T {
        self.send(&command(&["INFO", section]));
        let info = String::from_utf8(self.recv_bulk()).expect("INFO is text");
        info.lines()
            .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
            .and_then(|v| v.trim().parse().ok())
            .unwrap_or_else(|| panic!("no number {field} in INFO {section}"))
    }

    /// One command, waiting for its reply.
    pub fn call<A: AsRef<[u8]>>(&mut self, args: &[A]) -> Reply {
        self.send(&command(args));
        self.recv()
    }

    fn fill(&mut self) {
        if self.start > 0 {
            self.buf.drain(..self.start);
            self.start = 0;
        }
        let len = self.buf.len();
        let want = (len + (1 << 16)).max(self.buf.capacity());
        self.buf.resize(want, 0);
        let n = self
            .stream
            .read(&mut self.buf[len..])
            .expect("read from redis-server");
        assert!(n > 0, "redis-server closed the connection");
        self.buf.truncate(len + n);
    }
}
