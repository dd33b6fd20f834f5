//! `Conn`, the tests' connection: a `redis::ConnectionLike` over one TCP
//! socket that survives the process being stopped and continued.
//!
//! Why not `Conn`: Linux fails a `recv` on a socket with a read
//! timeout (`SO_RCVTIMEO`) with EINTR when the process is stopped and
//! continued, with no signal handler at all (signal(7), "Interruption of
//! system calls ... by stop signals"). CI sandboxes freeze and thaw their
//! jobs; `Conn`'s parser returns that EINTR as the command's
//! error and drops its reply, so a test failed on a healthy server
//! ("TYPE/PEXPIRETIME pipeline: Interrupted system call (os error 4)"). Here
//! the read is simply made again; the timeouts still bound every read.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::net::{Shutdown, TcpStream, ToSocketAddrs};
use std::time::Duration;

use redis::{ConnectionLike, RedisError, RedisResult, Value};

/// A socket read that restarts when interrupted (EINTR) instead of failing.
struct Restarting(TcpStream);

impl Read for Restarting {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        loop {
            match self.0.read(buf) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => return other,
            }
        }
    }
}

/// A pub/sub message: the channel, the pattern that matched it (for
/// PSUBSCRIBE), and the payload.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Message {
    pub channel: Vec<u8>,
    pub pattern: Option<Vec<u8>>,
    pub payload: Vec<u8>,
}

impl Message {
    pub fn channel_str(&self) -> String {
        String::from_utf8_lossy(&self.channel).into_owned()
    }

    pub fn payload_str(&self) -> String {
        String::from_utf8_lossy(&self.payload).into_owned()
    }
}

/// One connection to a server; see the module's doc for why it is ours.
pub struct Conn {
    socket: TcpStream,
    reader: io::BufReader<Restarting>,
    parser: redis::Parser,
    /// Replies owed to requests whose read failed (a timeout): read and
    /// dropped before the next reply, so a late reply never answers a later
    /// request (what `Conn` does too).
    owed: usize,
    /// Messages that arrived while a subscription waited for its
    /// confirmation, in order.
    messages: VecDeque<Message>,
    open: bool,
}

impl Conn {
    /// Connects to `addr` ("127.0.0.1:6379"), with `timeout` for the connect
    /// and for every read and write.
    pub fn open(addr: &str, timeout: Duration) -> io::Result<Conn> {
        let mut last = io::Error::new(io::ErrorKind::NotFound, format!("no address in {addr}"));
        for a in addr.to_socket_addrs()? {
            match TcpStream::connect_timeout(&a, timeout) {
                Ok(socket) => {
                    socket.set_nodelay(true)?;
                    socket.set_read_timeout(Some(timeout))?;
                    socket.set_write_timeout(Some(timeout))?;
                    let reader = io::BufReader::new(Restarting(socket.try_clone()?));
                    return Ok(Conn {
                        socket,
                        reader,
                        parser: redis::Parser::new(),
                        owed: 0,
                        messages: VecDeque::new(),
                        open: true,
                    });
                }
                Err(e) => last = e,
            }
        }
        Err(last)
    }

    /// Bounds every later read (`None`: no bound).
    pub fn set_read_timeout(&self, timeout: Option<Duration>) -> RedisResult<()> {
        Ok(self.socket.set_read_timeout(timeout)?)
    }

    /// Bounds every later write (`None`: no bound).
    pub fn set_write_timeout(&self, timeout: Option<Duration>) -> RedisResult<()> {
        Ok(self.socket.set_write_timeout(timeout)?)
    }

    /// Sends an encoded command without reading its reply.
    pub fn send_packed_command(&mut self, cmd: &[u8]) -> RedisResult<()> {
        // `write_all` already makes an interrupted write again.
        self.socket.write_all(cmd).map_err(|e| self.failed(e))
    }

    /// The next reply or pushed message, whatever it is.
    pub fn recv_response(&mut self) -> RedisResult<Value> {
        self.read_reply(true)
    }

    /// SUBSCRIBE to `channel`; returns once the server confirmed it.
    pub fn subscribe(&mut self, channel: &str) -> RedisResult<()> {
        self.subscription("SUBSCRIBE", "subscribe", channel)
    }

    /// PSUBSCRIBE to `pattern`; returns once the server confirmed it.
    pub fn psubscribe(&mut self, pattern: &str) -> RedisResult<()> {
        self.subscription("PSUBSCRIBE", "psubscribe", pattern)
    }

    /// The next message on a subscribed connection (a timeout is an error
    /// with `is_timeout()`; the connection stays usable).
    pub fn next_message(&mut self) -> RedisResult<Message> {
        if let Some(m) = self.messages.pop_front() {
            return Ok(m);
        }
        loop {
            let reply = self.read_reply(false)?;
            if let Some(m) = message_of(&reply) {
                return Ok(m);
            }
        }
    }

    fn subscription(&mut self, verb: &str, kind: &str, name: &str) -> RedisResult<()> {
        self.send_packed_command(&redis::cmd(verb).arg(name).get_packed_command())?;
        loop {
            let reply = self.read_reply(false)?;
            if let Some(m) = message_of(&reply) {
                self.messages.push_back(m);
                continue;
            }
            let items = match &reply {
                Value::Array(items) | Value::Push { data: items, .. } => items.as_slice(),
                Value::ServerError(e) => return Err(e.clone().into()),
                _ => &[],
            };
            if let (Some(Value::BulkString(k)), Some(Value::BulkString(n))) =
                (items.first(), items.get(1))
            {
                if k.as_slice() == kind.as_bytes() && n.as_slice() == name.as_bytes() {
                    return Ok(());
                }
            }
        }
    }

    /// One value from the socket, after the replies owed to failed reads.
    /// `answer`: the value read answers a request (a timed-out read leaves
    /// a reply owed), rather than being a subscriber's next message (a
    /// timed-out wait for one owes nothing).
    fn read_reply(&mut self, answer: bool) -> RedisResult<Value> {
        loop {
            let value = match self.parser.parse_value(&mut self.reader) {
                Ok(v) => v,
                Err(e) => return Err(self.failed_read(e, answer)),
            };
            if self.owed > 0 && !matches!(value, Value::Push { .. }) {
                self.owed -= 1;
                continue;
            }
            return Ok(value);
        }
    }

    fn failed_read(&mut self, e: RedisError, answer: bool) -> RedisError {
        if e.is_timeout() {
            // The reply may still come: it belongs to this request.
            if answer {
                self.owed += 1;
            }
        } else {
            // The peer hung up, or the stream cannot be parsed any more.
            self.close();
        }
        e
    }

    fn failed(&mut self, e: io::Error) -> RedisError {
        if matches!(
            e.kind(),
            io::ErrorKind::BrokenPipe | io::ErrorKind::ConnectionReset
        ) {
            self.close();
        }
        e.into()
    }

    fn close(&mut self) {
        let _ = self.socket.shutdown(Shutdown::Both);
        self.open = false;
    }

    /// A reply that is not a RESP3 push (which answers no request).
    fn read_answer(&mut self) -> RedisResult<Value> {
        loop {
            match self.read_reply(true)? {
                Value::Push { .. } => continue,
                v => return Ok(v),
            }
        }
    }
}

/// A pub/sub message in `reply` (RESP2 array or RESP3 push), if it is one.
fn message_of(reply: &Value) -> Option<Message> {
    let items = match reply {
        Value::Array(items) | Value::Push { data: items, .. } => items,
        _ => return None,
    };
    let kind = match reply {
        Value::Push { kind, .. } => kind.to_string().into_bytes(),
        _ => match items.first() {
            Some(Value::BulkString(k)) => k.clone(),
            _ => return None,
        },
    };
    // In a RESP3 push the kind is not repeated in the data.
    let rest = match reply {
        Value::Push { .. } => &items[..],
        _ => &items[1..],
    };
    let bulk = |v: Option<&Value>| match v {
        Some(Value::BulkString(b)) => Some(b.clone()),
        _ => None,
    };
    match kind.as_slice() {
        b"message" | b"smessage" => Some(Message {
            channel: bulk(rest.first())?,
            pattern: None,
            payload: bulk(rest.get(1))?,
        }),
        b"pmessage" => Some(Message {
            pattern: Some(bulk(rest.first())?),
            channel: bulk(rest.get(1))?,
            payload: bulk(rest.get(2))?,
        }),
        _ => None,
    }
}

impl ConnectionLike for Conn {
    fn req_packed_command(&mut self, cmd: &[u8]) -> RedisResult<Value> {
        self.send_packed_command(cmd)?;
        self.read_answer()
    }

    fn req_packed_commands(
        &mut self,
        cmd: &[u8],
        offset: usize,
        count: usize,
    ) -> RedisResult<Vec<Value>> {
        self.send_packed_command(cmd)?;
        let mut out = Vec::with_capacity(count);
        let mut first_err = None;
        // Every reply is read, even after an error, so that none is left to
        // answer a later request.
        for idx in 0..offset + count {
            match self.read_answer() {
                // A queued command refused inside MULTI: the transaction
                // aborts (EXEC answers EXECABORT); this refusal says why.
                Ok(Value::ServerError(e)) if idx < offset => {
                    first_err.get_or_insert(e.into());
                }
                Ok(v) if idx >= offset => out.push(v),
                Ok(_) => {}
                Err(e) => {
                    first_err.get_or_insert(e);
                }
            }
        }
        first_err.map_or(Ok(out), Err)
    }

    fn get_db(&self) -> i64 {
        0
    }

    fn check_connection(&mut self) -> bool {
        redis::cmd("PING").query::<String>(self).is_ok()
    }

    fn is_open(&self) -> bool {
        self.open
    }
}
