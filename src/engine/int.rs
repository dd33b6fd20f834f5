//! Integers as Redis reads and writes them: hold counts, latch values and
//! deadlines are decimal strings in hashes and keys, parsed and formatted on
//! every command, so both run in one pass without allocating.

/// Strict decimal parsing, as Redis's `string2ll`: no sign but `-`, no
/// leading zeros, no spaces. One pass: every lock command parses a count.
pub fn parse_i64(value: &[u8]) -> Option<i64> {
    let (negative, digits) = match value.strip_prefix(b"-") {
        Some(digits) => (true, digits),
        None => (false, value),
    };
    match digits {
        [] | [b'0', _, ..] => return None,
        [b'0'] => return (!negative).then_some(0),
        _ => {}
    }
    // Summed as a negative number: i64::MIN has no positive counterpart.
    let mut n: i64 = 0;
    for &d in digits {
        if !d.is_ascii_digit() {
            return None;
        }
        n = n.checked_mul(10)?.checked_sub(i64::from(d - b'0'))?;
    }
    if negative {
        Some(n)
    } else {
        n.checked_neg()
    }
}

/// Room for any i64 in decimal.
pub const DECIMAL_LEN: usize = 20;

/// `n` in decimal, as Redis writes integers, formatted into `buf`.
pub fn decimal(n: i64, buf: &mut [u8; DECIMAL_LEN]) -> &[u8] {
    let mut at = DECIMAL_LEN;
    let mut rest = n.unsigned_abs();
    loop {
        at -= 1;
        buf[at] = b'0' + (rest % 10) as u8;
        rest /= 10;
        if rest == 0 {
            break;
        }
    }
    if n < 0 {
        at -= 1;
        buf[at] = b'-';
    }
    &buf[at..]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decimals_are_written_as_redis_writes_integers() {
        for n in [0, 1, 9, 10, 57, -1, -10, 100_000, i64::MAX, i64::MIN] {
            assert_eq!(decimal(n, &mut [0; DECIMAL_LEN]), n.to_string().as_bytes());
        }
    }
}
