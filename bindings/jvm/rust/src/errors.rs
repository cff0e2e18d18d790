//! Core errors as one uniffi error, which the Kotlin API turns into the
//! exception class of its kind (`FenceLockException` and one subclass per kind).

/// One node's part in a failed operation.
#[derive(uniffi::Record)]
pub struct NativeNodeReport {
    /// The node, as a URL without credentials.
    pub node: String,
    /// The stable outcome name (`"ok"`, `"held_by_other"`, `"missing"`,
    /// `"timed_out"`, `"failed"`, `"pending"`).
    pub outcome: String,
    /// The outcome in words (a failed node's own words).
    pub detail: String,
}

/// A core error: its kind's stable name and code, the message, the resource
/// and what each node answered. (The message field is not called `message`,
/// which Kotlin's `Throwable` owns.)
#[derive(Debug, thiserror::Error, uniffi::Error)]
pub enum NativeError {
    /// Every core error.
    #[error("{kind}: {text}")]
    Failure {
        /// The kind's stable name (`"not_acquired"`, …).
        kind: String,
        /// The kind's stable code.
        code: i32,
        /// The message without the per-node list.
        text: String,
        /// The resource the failed operation was about, if any.
        resource: Option<String>,
        /// What each node answered (empty when no node was asked).
        nodes: Vec<NativeNodeReport>,
    },
}

impl std::fmt::Debug for NativeNodeReport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.node, self.detail)
    }
}

impl From<fencelock::Error> for NativeError {
    fn from(err: fencelock::Error) -> Self {
        NativeError::Failure {
            kind: err.kind().as_str().to_owned(),
            code: err.kind().code(),
            text: err.message().to_owned(),
            resource: err.resource().map(str::to_owned),
            nodes: err
                .nodes()
                .iter()
                .map(|report| NativeNodeReport {
                    node: report.node.clone(),
                    outcome: report.outcome.name().to_owned(),
                    detail: report.outcome.to_string(),
                })
                .collect(),
        }
    }
}

/// An invalid argument found by this crate before the core saw it.
pub(crate) fn invalid(text: impl Into<String>) -> NativeError {
    fencelock::Error::new(fencelock::ErrorKind::InvalidArgument, text).into()
}

/// `Result` with [`NativeError`].
pub(crate) type Result<T, E = NativeError> = std::result::Result<T, E>;
