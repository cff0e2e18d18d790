//! `fencelock_fence`: what a fenced write carries.

/// What a fenced write carries: a fencing token and the holder id of the
/// grant it comes from ([`crate::fencelock_lock_fence`]). Storage accepts it
/// over an equal token only from the same grant. `holder` 0 is a bare token,
/// which writes only where every stored token is older.
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct fencelock_fence {
    /// The fencing token.
    pub token: u64,
    /// The grant's holder id, 1 to `FENCELOCK_MAX_HOLDER_ID`; 0 for a bare token.
    pub holder: u64,
}

impl From<fencelock::Fence> for fencelock_fence {
    fn from(fence: fencelock::Fence) -> Self {
        fencelock_fence {
            token: fence.token,
            holder: fence.holder,
        }
    }
}
