//! Fenced writes: what a write carries so that storage can refuse a stale
//! holder, and what the FENCED_SET script's answer means.
//!
//! Fencing tokens only increase while the nodes keep their counters. A node
//! that forgets its counter (a restart without AOF) can let a later grant
//! get the same token as an earlier one (docs/protocol.md §5). A write
//! therefore carries the id of its grant beside the token, and storage
//! accepts an equal token only from the grant that stored it: the same
//! holder may write again, another holder with the same token may not.

use std::fmt;
use std::str::FromStr;

use crate::error::{Error, ErrorKind, NodeOutcome, Result};
use crate::node::Reply;

/// What a fenced write carries: the lock's fencing token and the id of the
/// grant (its *holder id*).
///
/// Storage accepts the write when the token is larger than the stored one,
/// or equal and from the same holder id. A bare token (holder 0, from
/// `Fence::from(token)`) is accepted only when strictly larger. Get one
/// from [`crate::Lock::fence`]; its text form `token:holder` (e.g.
/// `42:6011813270612431301`) travels to another process and parses back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Fence {
    /// The fencing token: larger than every earlier grant's.
    pub token: u64,
    /// The grant's id, 1 to 2^63 − 1 (fits a signed 64-bit SQL column);
    /// 0 for a bare token.
    pub holder: u64,
}

/// The largest holder id: ids fit a signed 64-bit integer (SQL `bigint`).
pub const MAX_HOLDER_ID: u64 = i64::MAX as u64;

impl Fence {
    /// A fence of a bare token: it writes only where every stored token is older.
    pub fn bare(token: u64) -> Fence {
        Fence { token, holder: 0 }
    }
}

impl From<u64> for Fence {
    fn from(token: u64) -> Fence {
        Fence::bare(token)
    }
}

impl fmt::Display for Fence {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.token, self.holder)
    }
}

impl FromStr for Fence {
    type Err = Error;

    /// `token:holder`, or a bare `token`; decimal.
    fn from_str(text: &str) -> Result<Fence> {
        let invalid = || {
            Error::invalid(format!(
                "'{text}' is not a fence: expected token:holder (two decimal numbers, the holder at most {MAX_HOLDER_ID}) or a bare token"
            ))
        };
        let number = |part: &str| -> Result<u64> {
            if part.is_empty() || !part.bytes().all(|b| b.is_ascii_digit()) {
                return Err(invalid());
            }
            part.parse().map_err(|_| invalid())
        };
        let fence = match text.split_once(':') {
            Some((token, holder)) => Fence {
                token: number(token)?,
                holder: number(holder)?,
            },
            None => Fence::bare(number(text)?),
        };
        if fence.holder > MAX_HOLDER_ID {
            return Err(invalid());
        }
        Ok(fence)
    }
}

/// A fresh holder id for a grant, from the OS CSPRNG: 1 to [`MAX_HOLDER_ID`].
pub(crate) fn new_holder_id() -> Result<u64> {
    let random = crate::token::random_u64()?;
    Ok((random >> 1).max(1))
}

/// What FENCED_SET's reply means for a write of `fence` to `key` on `node`.
pub(crate) fn fenced_set_outcome(reply: Reply, key: &str, fence: Fence, node: &str) -> Result<()> {
    match reply.as_ref().ok().and_then(crate::node::as_i64) {
        Some(1) => Ok(()),
        Some(0) => Err(Error::new(
            ErrorKind::StaleToken,
            format!(
                "write to '{key}' refused: fencing token {} is older than the one stored there, or equal to it \
                 but from another grant; a newer lock holder has written since: stop and re-acquire",
                fence.token
            ),
        )),
        _ => Err(Error::new(
            // The node's own kind: a value it cannot store is the caller's
            // to fix (invalid_argument), missing rights are `auth`.
            match &reply {
                Err(NodeOutcome::Failed(failure)) => failure.kind,
                _ => ErrorKind::Unavailable,
            },
            format!(
                "fenced write to '{key}' on {node} failed: {}",
                match reply {
                    Err(outcome) => outcome.to_string(),
                    Ok(value) => format!("unexpected reply {value:?}"),
                }
            ),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_fence_travels_as_text() {
        let fence = Fence {
            token: 42,
            holder: MAX_HOLDER_ID,
        };
        assert_eq!(fence.to_string().parse::<Fence>().unwrap(), fence);
        assert_eq!("7".parse::<Fence>().unwrap(), Fence::bare(7));
        for bad in [
            "",
            ":",
            "1:",
            ":1",
            "x:1",
            "1:2:3",
            "-1:2",
            "1:9223372036854775808",
            "+1",
        ] {
            let err = bad.parse::<Fence>().unwrap_err();
            assert_eq!(err.kind(), ErrorKind::InvalidArgument, "{bad:?}");
        }
    }

    #[test]
    fn holder_ids_are_nonzero_and_fit_a_signed_column() {
        for _ in 0..1000 {
            let id = new_holder_id().unwrap();
            assert!((1..=MAX_HOLDER_ID).contains(&id));
        }
    }
}
