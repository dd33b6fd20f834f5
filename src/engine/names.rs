//! Redisson's key and channel names for one lock (docs/design.md, contract §1).

use super::error::LockError;
use super::int::{decimal, DECIMAL_LEN};

/// Field of the lock hash that holds `read` or `write`.
pub const MODE_FIELD: &[u8] = b"mode";
/// Suffix that turns an owner into its write field.
pub const WRITE_SUFFIX: &[u8] = b":write";
const TIMEOUT_INFIX: &[u8] = b":rwlock_timeout:";
const CHANNEL_PREFIX: &[u8] = b"redisson_rwlock";
const LOCK_CHANNEL_PREFIX: &[u8] = b"redisson_lock__channel";
const TOKEN_PREFIX: &[u8] = b"redisson_lock_token";
const LATCH_PREFIX: &[u8] = b"redisson_unlock_latch";
/// Prefix of an idempotent acquisition's latch (docs/design.md §14.7).
const REQUEST_LATCH_PREFIX: &[u8] = b"redisson_lock_request_latch";
/// Redisson's semaphore channel (`RSemaphore`, contract §15).
const SEMAPHORE_CHANNEL_PREFIX: &[u8] = b"redisson_sc";
const QUEUE_PREFIX: &[u8] = b"redisson_lock_queue";
const LINE_TIMEOUT_PREFIX: &[u8] = b"redisson_lock_timeout";

/// A lock as the shell's registries know it, across databases: its
/// database and its name.
pub type LockId = (i32, Vec<u8>);

/// Every name Redisson derives from one lock name, which it borrows;
/// derived names are made when asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LockNames<'a> {
    hash: &'a [u8],
    /// The name carries braces: derived keys keep it as it is (`name:…`)
    /// instead of wrapping it (`{name}:…`).
    braced: bool,
}

impl<'a> LockNames<'a> {
    /// Derives the names, refusing a lock name whose derived keys would hash to
    /// another cluster slot than the lock hash itself.
    pub fn new(name: &'a [u8]) -> Result<Self, LockError> {
        if !keeps_slot(name) {
            return Err(LockError::SpreadName);
        }
        Ok(LockNames {
            hash: name,
            braced: name.contains(&b'{'),
        })
    }

    pub fn hash(&self) -> &'a [u8] {
        self.hash
    }

    /// Redisson's channel for the read-write lock's messages.
    pub fn channel(&self) -> KeyBuf {
        self.prefixed(CHANNEL_PREFIX)
    }

    /// Redisson's channel for the plain lock's messages (`RLock`).
    pub fn lock_channel(&self) -> KeyBuf {
        self.prefixed(LOCK_CHANNEL_PREFIX)
    }

    /// Redisson's channel for a semaphore's new counts (`RSemaphore`).
    pub fn semaphore_channel(&self) -> KeyBuf {
        self.prefixed(SEMAPHORE_CHANNEL_PREFIX)
    }

    /// A permit-expirable semaphore's permits taken
    /// (`RPermitExpirableSemaphore`, contract §17): Redisson's `suffixName`,
    /// `{name}:timeout`, or `name:timeout` when the name carries braces.
    pub fn permit_timeout(&self) -> KeyBuf {
        let (open, close): (&[u8], &[u8]) = if self.braced {
            (b"", b"")
        } else {
            (b"{", b"}")
        };
        KeyBuf::concat(&[open, self.hash, close, b":timeout"])
    }

    /// The lock's fencing token counter (`RFencedLock`).
    pub fn token_key(&self) -> KeyBuf {
        self.prefixed(TOKEN_PREFIX)
    }

    /// The fair lock's line (`RFairLock`): a list of waiters' owners in
    /// arrival order.
    pub fn fair_queue(&self) -> KeyBuf {
        self.prefixed(QUEUE_PREFIX)
    }

    /// The fair lock's zset of each waiter's deadline (absolute ms).
    pub fn fair_timeout(&self) -> KeyBuf {
        self.prefixed(LINE_TIMEOUT_PREFIX)
    }

    /// A fair lock waiter's own channel: `redisson_lock__channel:{name}:<owner>`.
    pub fn waiter_channel(&self, owner: &[u8]) -> Vec<u8> {
        let mut channel = self.lock_channel().to_vec();
        channel.push(b':');
        channel.extend_from_slice(owner);
        channel
    }

    /// `<prefix>:{name}`, or `<prefix>:name` when the name carries braces.
    fn prefixed(&self, prefix: &[u8]) -> KeyBuf {
        let (open, close): (&[u8], &[u8]) = if self.braced {
            (b":", b"")
        } else {
            (b":{", b"}")
        };
        KeyBuf::concat(&[prefix, open, self.hash, close])
    }

    /// `{name}`, or the name itself when it already carries braces.
    fn push_key_prefix(&self, out: &mut Vec<u8>) {
        if self.braced {
            out.extend_from_slice(self.hash);
        } else {
            out.push(b'{');
            out.extend_from_slice(self.hash);
            out.push(b'}');
        }
    }

    /// Timeout key of the `n`-th read hold of the hash field `field`.
    pub fn timeout_key(&self, field: &[u8], n: i64) -> Vec<u8> {
        self.lease_key(field, n).to_vec()
    }

    /// [`Self::timeout_key`] built on the stack when it is short, as the
    /// lease keys commands create and delete nearly always are.
    pub fn lease_key(&self, field: &[u8], n: i64) -> KeyBuf {
        let mut digits = [0; DECIMAL_LEN];
        let digits = decimal(n, &mut digits);
        let (open, close): (&[u8], &[u8]) = if self.braced {
            (b"", b"")
        } else {
            (b"{", b"}")
        };
        KeyBuf::concat(&[open, self.hash, close, b":", field, TIMEOUT_INFIX, digits])
    }

    /// [`Self::timeout_key`] into `out` (cleared first), so a loop over many
    /// keys reuses one buffer.
    pub fn write_timeout_key(&self, out: &mut Vec<u8>, field: &[u8], n: i64) {
        out.clear();
        out.reserve(self.hash.len() + field.len() + TIMEOUT_INFIX.len() + DECIMAL_LEN + 3);
        self.push_key_prefix(out);
        out.push(b':');
        out.extend_from_slice(field);
        out.extend_from_slice(TIMEOUT_INFIX);
        out.extend_from_slice(decimal(n, &mut [0; DECIMAL_LEN]));
    }

    /// Latch key of an idempotent unlock request.
    pub fn latch_key(&self, request_id: &[u8]) -> Vec<u8> {
        let mut key = prefix(LATCH_PREFIX, self.hash);
        key.push(b':');
        key.extend_from_slice(request_id);
        key
    }

    /// Latch key of an idempotent acquisition request, on the unlock
    /// latch's pattern: `redisson_lock_request_latch:{lock}:<id>`.
    pub fn request_latch_key(&self, request_id: &[u8]) -> Vec<u8> {
        let mut key = prefix(REQUEST_LATCH_PREFIX, self.hash);
        key.push(b':');
        key.extend_from_slice(request_id);
        key
    }
}

/// How long a key [`KeyBuf`] keeps on the stack.
const KEY_INLINE: usize = 128;

/// A derived key name: on the stack when it fits, else on the heap.
pub struct KeyBuf {
    len: usize,
    inline: [u8; KEY_INLINE],
    heap: Vec<u8>,
}

impl KeyBuf {
    fn concat(parts: &[&[u8]]) -> KeyBuf {
        let len = parts.iter().map(|p| p.len()).sum();
        let mut key = KeyBuf {
            len,
            inline: [0; KEY_INLINE],
            heap: Vec::new(),
        };
        if len > KEY_INLINE {
            key.heap = parts.concat();
        } else {
            let mut at = 0;
            for part in parts {
                key.inline[at..at + part.len()].copy_from_slice(part);
                at += part.len();
            }
        }
        key
    }
}

impl std::ops::Deref for KeyBuf {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        if self.len > KEY_INLINE {
            &self.heap
        } else {
            &self.inline[..self.len]
        }
    }
}

/// The write field of an owner.
pub fn write_field(owner: &[u8]) -> KeyBuf {
    KeyBuf::concat(&[owner, WRITE_SUFFIX])
}

/// Owners that would collide with the hash's other fields are refused.
pub fn check_owner(owner: &[u8]) -> Result<(), LockError> {
    if owner.is_empty() || owner == MODE_FIELD || owner.ends_with(WRITE_SUFFIX) {
        return Err(LockError::BadOwner);
    }
    Ok(())
}

/// Splits a hash field into its owner and whether it is the write field.
pub fn field_owner(field: &[u8]) -> (&[u8], bool) {
    match field.strip_suffix(WRITE_SUFFIX) {
        Some(owner) => (owner, true),
        None => (field, false),
    }
}

fn prefix(p: &[u8], name: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(p.len() + name.len() + 3);
    out.extend_from_slice(p);
    if name.contains(&b'{') {
        out.push(b':');
    } else {
        out.extend_from_slice(b":{");
    }
    out.extend_from_slice(name);
    if !name.contains(&b'{') {
        out.push(b'}');
    }
    out
}

/// Whether `key` could be a read lease key of the lock `hash` (its prefix
/// and the timeout infix; the owner part is not checked).
pub fn is_lease_key_of(hash: &[u8], key: &[u8]) -> bool {
    let rest = if hash.contains(&b'{') {
        key.strip_prefix(hash)
    } else {
        key.strip_prefix(b"{")
            .and_then(|k| k.strip_prefix(hash))
            .and_then(|k| k.strip_prefix(b"}"))
    };
    rest.and_then(|r| r.strip_prefix(b":"))
        .is_some_and(|r| r.windows(TIMEOUT_INFIX.len()).any(|w| w == TIMEOUT_INFIX))
}

/// Whether `key` has the shape of any lock's read lease key.
pub fn looks_like_lease_key(key: &[u8]) -> bool {
    key.windows(TIMEOUT_INFIX.len()).any(|w| w == TIMEOUT_INFIX)
}

/// The part of a key that Redis Cluster hashes (its hash tag, or the whole key).
pub fn hash_tag(key: &[u8]) -> &[u8] {
    if let Some(open) = key.iter().position(|&b| b == b'{') {
        if let Some(len) = key[open + 1..].iter().position(|&b| b == b'}') {
            if len > 0 {
                return &key[open + 1..open + 1 + len];
            }
        }
    }
    key
}

/// True when every key derived from `name` hashes like `name` itself. Derived
/// keys either wrap the name in braces or keep its own hash tag, so this holds
/// exactly for a non-empty name without braces, or one with a non-empty tag.
fn keeps_slot(name: &[u8]) -> bool {
    if name.contains(&b'{') {
        hash_tag(name) != name
    } else {
        !name.is_empty() && !name.contains(&b'}')
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(name: &str) -> LockNames<'_> {
        LockNames::new(name.as_bytes()).expect("valid name")
    }

    /// A row of contract §1's table: the lock `name` is its own hash's key,
    /// and derives the first lease key of owner `U:57`, the channel, and the
    /// latch of request `id`.
    fn follows_spec_table(
        name: &str,
        lease_key: &[u8],
        channel: &[u8],
        (id, latch): (&[u8], &[u8]),
    ) {
        let n = names(name);
        assert_eq!(n.hash(), name.as_bytes());
        assert_eq!(n.timeout_key(b"U:57", 1), lease_key, "{name}");
        assert_eq!(&*n.channel(), channel, "{name}");
        assert_eq!(n.latch_key(id), latch, "{name}");
    }

    #[test]
    fn plain_name_follows_spec_table() {
        follows_spec_table(
            "L",
            b"{L}:U:57:rwlock_timeout:1",
            b"redisson_rwlock:{L}",
            (b"9f3c", b"redisson_unlock_latch:{L}:9f3c"),
        );
        assert_eq!(&*write_field(b"U:57"), b"U:57:write");
    }

    #[test]
    fn acquisition_latches_follow_the_unlock_latch_s_pattern() {
        for (name, id, key) in [
            (
                "L",
                &b"9f3c"[..],
                &b"redisson_lock_request_latch:{L}:9f3c"[..],
            ),
            ("{t}:a", b"r", b"redisson_lock_request_latch:{t}:a:r"),
        ] {
            assert_eq!(names(name).request_latch_key(id), key, "{name}");
        }
    }

    #[test]
    fn braced_name_follows_spec_table() {
        follows_spec_table(
            "{t}:a",
            b"{t}:a:U:57:rwlock_timeout:1",
            b"redisson_rwlock:{t}:a",
            (b"r", b"redisson_unlock_latch:{t}:a:r"),
        );
    }

    #[test]
    fn lease_keys_are_recognised_as_their_lock_s() {
        for name in ["L", "{t}:a", "a:b"] {
            let n = names(name);
            let key = n.timeout_key(b"U:57", 3);
            assert!(is_lease_key_of(n.hash(), &key), "{name}");
            assert!(looks_like_lease_key(&key));
            assert!(!is_lease_key_of(b"L2", &key));
            assert!(!is_lease_key_of(n.hash(), &n.channel()));
            assert!(!is_lease_key_of(n.hash(), n.hash()));
        }
        assert!(!is_lease_key_of(b"L", b"{L}x:U:rwlock_timeout:1"));
        assert!(!looks_like_lease_key(b"{L}:U:57"));
    }

    #[test]
    fn derived_keys_share_the_slot_of_accepted_names() {
        for name in ["L", "a:b:c", "{t}:a", "x{t}y", "{t}}", "{a}{b}", "héllo"] {
            let n = names(name);
            let tag = hash_tag(name.as_bytes());
            assert_eq!(hash_tag(&n.timeout_key(b"{o}:1", 3)), tag, "{name}");
            assert_eq!(hash_tag(&n.channel()), tag, "{name}");
            assert_eq!(hash_tag(&n.latch_key(b"{r}")), tag, "{name}");
            assert_eq!(hash_tag(&n.request_latch_key(b"{r}")), tag, "{name}");
        }
    }

    #[test]
    fn names_that_would_spread_are_refused() {
        for name in ["", "a{b", "{}x", "x{}", "a}b", "}", "{"] {
            assert_eq!(
                LockNames::new(name.as_bytes()),
                Err(LockError::SpreadName),
                "{name:?}"
            );
        }
    }

    #[test]
    fn reserved_owners_are_refused() {
        for owner in ["", "mode", "u:write", ":write"] {
            assert_eq!(check_owner(owner.as_bytes()), Err(LockError::BadOwner));
        }
        for owner in ["u:1", "modes", "write", "u:writer"] {
            assert_eq!(check_owner(owner.as_bytes()), Ok(()));
        }
    }

    #[test]
    fn lease_keys_of_any_length() {
        let n = names("L");
        let long = vec![b'o'; 300];
        for field in [&b"U:57"[..], &long] {
            let mut expected = b"{L}:".to_vec();
            expected.extend_from_slice(field);
            expected.extend_from_slice(b":rwlock_timeout:3");
            assert_eq!(&*n.lease_key(field, 3), &expected[..]);
        }
    }

    #[test]
    fn timeout_keys_reuse_a_buffer() {
        let n = names("L");
        let mut buf = b"left over".to_vec();
        n.write_timeout_key(&mut buf, b"U:57", 12);
        assert_eq!(buf, b"{L}:U:57:rwlock_timeout:12");
        assert_eq!(n.timeout_key(b"U:57", 12), buf);
    }

    #[test]
    fn fields_split_into_owner_and_kind() {
        assert_eq!(field_owner(b"u:1:write"), (&b"u:1"[..], true));
        assert_eq!(field_owner(b"u:1"), (&b"u:1"[..], false));
    }
}
