'use strict'

// The error classes fencelock rejects with: exactly this module's exports
// (index.js spreads them into the package's). `make-error.js` builds them.

/**
 * Base class of every error fencelock rejects with (bad arguments aside, which are `TypeError`/`RangeError`).
 *
 * One subclass per error kind of the core, named by one rule: the kind in
 * CamelCase plus `Error` (`not_held` is `NotHeldError`), except `timeout` and
 * `lost`, which are `LockTimeoutError` and `LockLostError`. Each has `kind`
 * (the core's name) and `code` (the kind in upper case, e.g. `'NOT_HELD'`).
 * `test/vectors.test.js` holds the classes to tests/vectors/protocol.json.
 */
class FenceLockError extends Error {
  /**
   * @param {string} message
   * @param {{ resource?: string | null, nodes?: Array<{ node: string, outcome: string, detail: string }>, cause?: unknown }} [details]
   */
  constructor(message, details = {}) {
    super(message, details.cause === undefined ? undefined : { cause: details.cause })
    /** The resource the failed operation was about, or `null`. */
    this.resource = details.resource ?? null
    /** What each node answered, for operations that went to several nodes. */
    this.nodes = details.nodes ?? []
    /** The core's name of this kind of failure, e.g. `'not_acquired'`. */
    this.kind = new.target.kind
    /** The stable code of this kind of failure, e.g. `'NOT_ACQUIRED'`. */
    this.code = new.target.code
  }

  get name() {
    return this.constructor.name
  }
}
FenceLockError.kind = 'error'
FenceLockError.code = 'FENCELOCK'

/** The subclass of `FenceLockError` for core kind `kind`. */
function kindClass(Class, kind) {
  Class.kind = kind
  Class.code = kind.toUpperCase()
  return Class
}

/** The lock is held by someone else (one attempt, or `wait: 0`). */
class NotAcquiredError extends FenceLockError {}
/** The `wait` deadline passed before the lock could be taken. */
class LockTimeoutError extends FenceLockError {}
/** Not enough nodes answered to decide: Redis unreachable, paused or erroring. */
class UnavailableError extends FenceLockError {}
/** The lock was lost while held (key deleted, expired or taken over). */
class LockLostError extends FenceLockError {}
/** The lock was no longer held when released or extended. */
class NotHeldError extends FenceLockError {}
/** A fenced write carried a token older than the one already stored. */
class StaleTokenError extends FenceLockError {}
/** An argument the core refused (e.g. a resource name starting with `}`). */
class InvalidArgumentError extends FenceLockError {}
/** The client configuration is invalid (bad URL, duplicate node, …). */
class ConfigError extends FenceLockError {}
/** Redis refused the credentials, or the ACL user lacks a permission. */
class AuthError extends FenceLockError {}
/** The TLS handshake or certificate verification failed. */
class TlsError extends FenceLockError {}
/** The client is closed. */
class ClosedError extends FenceLockError {}
/** A blocking call was made inside fencelock's own runtime (never from this front's own calls). */
class WouldBlockError extends FenceLockError {}
/**
 * An acquire stopped by its `AbortSignal`. `Client#acquire` rejects with the
 * signal's reason instead, as the platform's own APIs do; this class exists
 * for the core kind `cancelled`.
 */
class CancelledError extends FenceLockError {}
/** A bug in fencelock: a panic inside it was caught before it reached you. Please report it. */
class InternalError extends FenceLockError {}

// Each class's core kind and code.
for (const [Class, kind] of [
  [NotAcquiredError, 'not_acquired'],
  [LockTimeoutError, 'timeout'],
  [UnavailableError, 'unavailable'],
  [LockLostError, 'lost'],
  [NotHeldError, 'not_held'],
  [StaleTokenError, 'stale_token'],
  [InvalidArgumentError, 'invalid_argument'],
  [ConfigError, 'config'],
  [AuthError, 'auth'],
  [TlsError, 'tls'],
  [ClosedError, 'closed'],
  [WouldBlockError, 'would_block'],
  [CancelledError, 'cancelled'],
  [InternalError, 'internal'],
]) {
  kindClass(Class, kind)
}

module.exports = {
  FenceLockError,
  NotAcquiredError,
  LockTimeoutError,
  UnavailableError,
  LockLostError,
  NotHeldError,
  StaleTokenError,
  InvalidArgumentError,
  ConfigError,
  AuthError,
  TlsError,
  ClosedError,
  WouldBlockError,
  CancelledError,
  InternalError,
}
