//! Redisson's key and channel names for one lock (SPEC section 1).

use super::error::LockError;

/// Field of the lock hash that holds `read` or `write`.
pub const MODE_FIELD: &[u8] = b"mode";
/// Suffix that turns an owner into its write field.
pub const WRITE_SUFFIX: &[u8] = b":write";
const TIMEOUT_INFIX: &[u8] = b":rwlock_timeout:";
const CHANNEL_PREFIX: &[u8] = b"redisson_rwlock";
const LATCH_PREFIX: &[u8] = b"redisson_unlock_latch";

/// Every name Redisson derives from one lock name.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LockNames {
    hash: Vec<u8>,
    /// `{name}`, or the name itself when it already carries braces.
    key_prefix: Vec<u8>,
    channel: Vec<u8>,
    latch_prefix: Vec<u8>,
}

impl LockNames {
    /// Derives the names, refusing a lock name whose derived keys would hash to
    /// another cluster slot than the lock hash itself.
    pub fn new(name: &[u8]) -> Result<Self, LockError> {
        if !keeps_slot(name) {
            return Err(LockError::SpreadName);
        }
        Ok(LockNames {
            hash: name.to_vec(),
            key_prefix: suffix_base(name),
            channel: prefix(CHANNEL_PREFIX, name),
            latch_prefix: prefix(LATCH_PREFIX, name),
        })
    }

    pub fn hash(&self) -> &[u8] {
        &self.hash
    }

    pub fn channel(&self) -> &[u8] {
        &self.channel
    }

    /// Timeout key of the `n`-th read hold of the hash field `field`.
    pub fn timeout_key(&self, field: &[u8], n: i64) -> Vec<u8> {
        let mut key = Vec::with_capacity(self.key_prefix.len() + field.len() + 40);
        key.extend_from_slice(&self.key_prefix);
        key.push(b':');
        key.extend_from_slice(field);
        key.extend_from_slice(TIMEOUT_INFIX);
        key.extend_from_slice(n.to_string().as_bytes());
        key
    }

    /// Latch key of an idempotent unlock request.
    pub fn latch_key(&self, request_id: &[u8]) -> Vec<u8> {
        let mut key = self.latch_prefix.clone();
        key.push(b':');
        key.extend_from_slice(request_id);
        key
    }
}

/// The write field of an owner.
pub fn write_field(owner: &[u8]) -> Vec<u8> {
    let mut field = owner.to_vec();
    field.extend_from_slice(WRITE_SUFFIX);
    field
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
    let mut out = p.to_vec();
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

fn suffix_base(name: &[u8]) -> Vec<u8> {
    if name.contains(&b'{') {
        name.to_vec()
    } else {
        let mut out = Vec::with_capacity(name.len() + 2);
        out.push(b'{');
        out.extend_from_slice(name);
        out.push(b'}');
        out
    }
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

    fn names(name: &str) -> LockNames {
        LockNames::new(name.as_bytes()).expect("valid name")
    }

    #[test]
    fn plain_name_follows_spec_table() {
        let n = names("L");
        assert_eq!(n.hash(), b"L");
        assert_eq!(n.timeout_key(b"U:57", 1), b"{L}:U:57:rwlock_timeout:1");
        assert_eq!(n.channel(), b"redisson_rwlock:{L}");
        assert_eq!(n.latch_key(b"9f3c"), b"redisson_unlock_latch:{L}:9f3c");
        assert_eq!(write_field(b"U:57"), b"U:57:write");
    }

    #[test]
    fn braced_name_follows_spec_table() {
        let n = names("{t}:a");
        assert_eq!(n.hash(), b"{t}:a");
        assert_eq!(n.timeout_key(b"U:57", 1), b"{t}:a:U:57:rwlock_timeout:1");
        assert_eq!(n.channel(), b"redisson_rwlock:{t}:a");
        assert_eq!(n.latch_key(b"r"), b"redisson_unlock_latch:{t}:a:r");
    }

    #[test]
    fn derived_keys_share_the_slot_of_accepted_names() {
        for name in ["L", "a:b:c", "{t}:a", "x{t}y", "{t}}", "{a}{b}", "héllo"] {
            let n = names(name);
            let tag = hash_tag(name.as_bytes());
            assert_eq!(hash_tag(&n.timeout_key(b"{o}:1", 3)), tag, "{name}");
            assert_eq!(hash_tag(n.channel()), tag, "{name}");
            assert_eq!(hash_tag(&n.latch_key(b"{r}")), tag, "{name}");
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
    fn fields_split_into_owner_and_kind() {
        assert_eq!(field_owner(b"u:1:write"), (&b"u:1"[..], true));
        assert_eq!(field_owner(b"u:1"), (&b"u:1"[..], false));
    }
}
