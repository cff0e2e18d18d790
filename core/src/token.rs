//! Lock tokens: 128 random bits from the OS CSPRNG, never printed.

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
    ///
    /// `getrandom` reads the kernel on every call, so a forked child never
    /// repeats its parent's tokens.
    pub(crate) fn generate() -> Result<Self> {
        let mut bytes = [0u8; TOKEN_BYTES];
        getrandom::fill(&mut bytes).map_err(|e| {
            Error::new(
                ErrorKind::Closed,
                format!("the operating system's random generator failed: {e}"),
            )
        })?;
        Ok(LockToken(hex(&bytes)))
    }

    pub(crate) fn as_str(&self) -> &str {
        // Only ASCII hex digits are ever stored.
        std::str::from_utf8(&self.0).unwrap_or_default()
    }
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
