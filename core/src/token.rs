//! Lock tokens: 128 random bits from the OS CSPRNG, never printed.

use std::cell::RefCell;
use std::fmt;

use crate::error::{Error, ErrorKind, Result};

/// Random bytes in one token (128 bits).
pub const TOKEN_BYTES: usize = 16;

/// The secret value that marks a lock key as ours.
///
/// Hex-encoded on the wire (32 characters). Redacted from `Debug`, so it never
/// reaches logs through `{:?}` of a lock.
#[derive(Clone, PartialEq, Eq)]
pub(crate) struct LockToken([u8; TOKEN_BYTES * 2]);

impl LockToken {
    /// Draws a fresh token from the operating system's CSPRNG.
    pub(crate) fn generate() -> Result<Self> {
        Ok(LockToken(hex(&draw()?)))
    }

    pub(crate) fn as_str(&self) -> &str {
        // Only ASCII hex digits are ever stored.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
}

/// 64 random bits from the OS CSPRNG (through the same pool as tokens).
pub(crate) fn random_u64() -> Result<u64> {
    let bytes = draw()?;
    let mut half = [0u8; 8];
    half.copy_from_slice(&bytes[..8]);
    Ok(u64::from_le_bytes(half))
}

/// Random bytes drawn from the OS ahead of use, per thread: one `getrandom`
/// system call serves [`POOL_TOKENS`] tokens instead of one (it was a
/// measurable share of an acquire). The bytes still come straight from the
/// kernel's CSPRNG; the pool only batches the reads.
struct Pool {
    bytes: [u8; POOL_TOKENS * TOKEN_BYTES],
    /// Where the unused bytes start; `bytes.len()` when empty.
    next: usize,
    /// The process the bytes were drawn in: a forked child shares its
    /// parent's copy of the pool, so it must draw its own.
    pid: u32,
}

/// Tokens served by one read of the OS generator.
const POOL_TOKENS: usize = 32;

thread_local! {
    static POOL: RefCell<Pool> = const {
        RefCell::new(Pool { bytes: [0; POOL_TOKENS * TOKEN_BYTES], next: POOL_TOKENS * TOKEN_BYTES, pid: 0 })
    };
}

/// The next token's random bytes; used bytes are wiped from the pool.
fn draw() -> Result<[u8; TOKEN_BYTES]> {
    let from_pool = POOL.try_with(|pool| {
        let mut pool = pool.borrow_mut();
        let pid = crate::runtime::current_pid();
        if pool.next == pool.bytes.len() || pool.pid != pid {
            fill(&mut pool.bytes)?;
            pool.next = 0;
            pool.pid = pid;
        }
        let start = pool.next;
        let taken = &mut pool.bytes[start..start + TOKEN_BYTES];
        let mut out = [0u8; TOKEN_BYTES];
        out.copy_from_slice(taken);
        taken.fill(0);
        pool.next += TOKEN_BYTES;
        Ok(out)
    });
    // A thread tearing down its thread-locals draws directly.
    from_pool.unwrap_or_else(|_| {
        let mut out = [0u8; TOKEN_BYTES];
        fill(&mut out)?;
        Ok(out)
    })
}

fn fill(bytes: &mut [u8]) -> Result<()> {
    getrandom::fill(bytes).map_err(|e| {
        Error::new(
            ErrorKind::Closed,
            format!("the operating system's random generator failed: {e}"),
        )
    })
}

/// Lowercase hex, kept inline: no allocation per token.
fn hex(bytes: &[u8; TOKEN_BYTES]) -> [u8; TOKEN_BYTES * 2] {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = [0u8; TOKEN_BYTES * 2];
    for (i, b) in bytes.iter().enumerate() {
        out[2 * i] = DIGITS[usize::from(b >> 4)];
        out[2 * i + 1] = DIGITS[usize::from(b & 0xf)];
    }
    out
}

impl fmt::Debug for LockToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("LockToken(<redacted>)")
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    #[test]
    fn tokens_are_unique_128_bit_and_unbiased() {
        let n = 20_000;
        let mut seen = HashSet::new();
        let mut ones = [0u32; TOKEN_BYTES * 8];
        for _ in 0..n {
            let token = LockToken::generate().unwrap();
            assert_eq!(token.as_str().len(), TOKEN_BYTES * 2);
            for (i, ch) in token.as_str().chars().enumerate() {
                let nibble = ch.to_digit(16).unwrap();
                for bit in 0..4 {
                    ones[i * 4 + bit] += (nibble >> bit) & 1;
                }
            }
            assert!(seen.insert(token.0));
        }
        for count in ones {
            let freq = f64::from(count) / f64::from(n);
            // 20,000 draws: 5 standard deviations is about 0.018.
            assert!((freq - 0.5).abs() < 0.02, "bit frequency {freq}");
        }
    }

    #[test]
    fn debug_redacts() {
        let token = LockToken::generate().unwrap();
        let shown = format!("{token:?}");
        assert!(!shown.contains(token.as_str()));
    }
}
