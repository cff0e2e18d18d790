/**
 * fencelock: distributed locks over Redis with fencing tokens — single-node
 * and Redlock over N independent masters, auto-renewal, an `AbortSignal`
 * aborted on loss, and `bigint` fencing tokens that strictly increase per
 * resource.
 *
 * Arguments are checked before anything is sent: a wrong type rejects with a
 * `TypeError`, an out-of-range value (NaN, Infinity, negative, non-integer
 * milliseconds, too long a resource) with a `RangeError`; both name the
 * argument. Every other failure is a {@link FenceLockError} subclass.
 */

import type * as native from './native'
import type { FencedValue, Leader, NodeLockState } from './native'

// The addon's result types are the package's own.
export type { FencedValue, Leader, NodeLockState }

/**
 * Client settings. Only `nodes` is required. The native addon's options
 * (`native.d.ts`), except that `nodes` may be one URL and PEM texts may be
 * `Buffer`s.
 */
export interface ClientOptions extends Omit<
  native.ClientOptions,
  'nodes' | 'tlsCaPem' | 'tlsClientCertPem' | 'tlsClientKeyPem'
> {
  /** One `redis://[user:password@]host:port[/db]` URL (single-node lock), or several independent masters (Redlock). `rediss://` for TLS. */
  nodes: string | string[]
  /** PEM CA bundle to trust for `rediss://` nodes instead of the Mozilla roots. */
  tlsCaPem?: string | Buffer
  /** PEM client certificate for mutual TLS (with `tlsClientKeyPem`). */
  tlsClientCertPem?: string | Buffer
  /** PEM client key for mutual TLS (with `tlsClientCertPem`). */
  tlsClientKeyPem?: string | Buffer
}

/** Options of one `tryAcquire`. */
export interface TryAcquireOptions {
  /** How long the lock lives on Redis without renewal, in ms (10 to 2^31-1; default the client's, 30000). */
  ttl?: number
  /** Renew at ttl/3 while held (default the client's, true). Off: a fixed lease that ends at its ttl unless extended. */
  autoRenew?: boolean
  /** Stop auto-renewal so the lock is not held longer than this in total, in ms. */
  maxHold?: number
  /** Stop auto-renewal after this many renewals. */
  maxRenewals?: number
  /**
   * Fair (FIFO) waiting: never take the lock ahead of an earlier waiter, even
   * when it is free at the moment this asks (default false: waiters are still
   * woken in arrival order, but a newcomer may take a free lock).
   */
  fair?: boolean
}

/** Options of one `acquire` / `using`. */
export interface AcquireOptions extends TryAcquireOptions {
  /** How long to keep retrying while the lock is busy, in ms (default the client's, 10000); 0 means one attempt. */
  wait?: number
  /** Cancels a waiting acquire: the promise rejects with `signal.reason`, and nothing of the attempt is left on Redis. */
  signal?: AbortSignal
}

/** Options of one `campaign`. */
export interface CampaignOptions {
  /** The leader's lease, in ms (10 to 2^31-1; default the client's, 30000): a leader that stops renewing is replaced about one ttl later. */
  ttl?: number
  /** How long to wait to be elected, in ms; omitted, the campaign waits until elected. Then rejects with `LockTimeoutError` (`NotAcquiredError` when 0). */
  wait?: number
  /** What observers learn about this leader (an address, an id): a string (UTF-8) or bytes, at most `MAX_LEADER_VALUE` bytes (else `InvalidArgumentError`). Default empty. */
  value?: string | Uint8Array
  /** Cancels a waiting campaign: the promise rejects with `signal.reason`, and nothing of the attempt is left on Redis. */
  signal?: AbortSignal
}

/** Options of one `observe`. */
export interface ObserveOptions {
  /** Ends the observation when aborted (the `for await` loop then finishes normally). */
  signal?: AbortSignal
}

/**
 * What a fenced write carries: a fencing token and the holder id of its
 * grant. Storage accepts it over an equal token only from the same grant.
 * `new Fence(token)` is a bare token (holder `0n`): it writes only where every
 * stored token is older. `String(fence)` is `"token:holder"`.
 */
export declare class Fence {
  constructor(token: bigint | number, holder?: bigint | number)
  /** Reads `"token:holder"` (or a bare `"token"`); `RangeError` otherwise. */
  static parse(text: string): Fence
  readonly token: bigint
  /** 1n to `MAX_HOLDER_ID` for a grant; 0n for a bare token. */
  readonly holder: bigint
  toString(): string
}

/** The largest holder id (2n**63n-1n): ids fit a signed 64-bit SQL column. */
export declare const MAX_HOLDER_ID: bigint

/**
 * A client of one Redis node (single-node locks) or of N independent masters
 * (Redlock: a lock is held when a majority granted it). It connects in the
 * background; operations wait for the connection.
 */
export declare class Client implements AsyncDisposable {
  /**
   * Checks `options` (a bad URL throws `ConfigError`, a bad value
   * `TypeError`/`RangeError`) and starts connecting.
   */
  constructor(options: ClientOptions)
  /**
   * Takes the lock on `resource`, retrying while it is busy for up to
   * `wait` ms. Rejects with `LockTimeoutError` when the wait ran out
   * (`NotAcquiredError` when `wait` is 0), `UnavailableError` when a majority
   * of nodes cannot be reached.
   */
  acquire(resource: string, options?: AcquireOptions): Promise<Lock>
  /** One attempt: the lock, or `null` when it is held by someone else. */
  tryAcquire(resource: string, options?: TryAcquireOptions): Promise<Lock | null>
  /**
   * Runs `fn(signal, lock)` while holding the lock on `resource`. `signal`
   * aborts (reason: a `LockLostError`) if the lock is lost meanwhile; the
   * lock is released when `fn` returns or throws. Resolves with what `fn`
   * returns.
   */
  using<T>(
    resource: string,
    options: AcquireOptions | undefined,
    fn: (signal: AbortSignal, lock: Lock) => T | PromiseLike<T>,
  ): Promise<T>
  using<T>(resource: string, fn: (signal: AbortSignal, lock: Lock) => T | PromiseLike<T>): Promise<T>
  /**
   * Writes `value` to the Redis hash `key` (fields `value`, `fence`,
   * `holder`) on the first node, only if `fence` (`lock.fence`) is newer than
   * the last write's: a larger token, or the same token from the same grant.
   * A bare token (bigint) writes only where every stored token is older.
   * Otherwise rejects with `StaleTokenError`.
   */
  fencedSet(key: string, value: string, fence: Fence | string | bigint | number): Promise<void>
  /** Reads what `fencedSet` stored, or `null`. */
  fencedGet(key: string): Promise<FencedValue | null>
  /** Each node's view of `resource` (held, ttl, fencing counter), for operators. */
  inspect(resource: string): Promise<NodeLockState[]>
  /**
   * Campaigns to lead the election `name`: waits in line until elected (or
   * up to `wait` ms: `LockTimeoutError`), announces `value` to observers and
   * resolves with the leadership. An election is a lock on its name: do not
   * also lock that name for anything else.
   */
  campaign(name: string, options?: CampaignOptions): Promise<Leadership>
  /**
   * Follows the election `name`: `for await (const leader of client.observe(name))`
   * yields the current leader (if any), then each new one. Throws at once for
   * a bad name or a closed client (`ClosedError`).
   */
  observe(name: string, options?: ObserveOptions): Observation
  /**
   * The counting semaphore `name` with `permits` permits (a whole number from
   * 1 to `MAX_PERMITS`): at most that many holders at once, each holding a
   * `Lock` whose `permit` says which permit it is. No I/O. Every client of a
   * semaphore must give the same number of permits while it is in use
   * (acquire rejects with `InvalidArgumentError`, "… has N permits …",
   * otherwise). Throws at once for a bad name or number of permits
   * (`TypeError`/`RangeError`; `InvalidArgumentError` for a name only the core
   * refuses, such as one starting with `}`). A semaphore and a lock of the
   * same name are unrelated.
   */
  semaphore(name: string, permits: number): Semaphore
  /**
   * The read-write lock `name`: any number of readers at once, or one writer,
   * each holding a `Lock` of its own. No I/O. Throws at once for a bad name
   * (`TypeError`/`RangeError`; `InvalidArgumentError` for a name only the
   * core refuses, such as one starting with `}`). A read-write lock, a
   * semaphore and a lock of the same name are unrelated.
   */
  rwLock(name: string): RwLock
  /**
   * What this client counted since it was made, as a plain object: a
   * snapshot taken at once (no I/O; also after `close()`). Every acquire
   * call counts, permits and read-write grants included: a refused
   * `tryAcquire` as a failure of kind `not_acquired`, a wait stopped by its
   * `AbortSignal` as `cancelled`. `fencelock/prometheus` reports it in a
   * prom-client registry.
   */
  metrics(): Metrics
  /**
   * Refuses new operations from now on (they reject with `ClosedError`) and
   * ends every open observation; held locks and leaderships can still be
   * released. Nothing the client made keeps the process alive afterwards.
   */
  close(): Promise<void>
  /** Same as `close()`, for `await using client = new Client(…)`. */
  [Symbol.asyncDispose](): Promise<void>
}

/**
 * How long acquire calls took (successful or not), in ms, from
 * `client.metrics().acquireLatency`.
 */
export interface AcquireLatency {
  /** How many acquire calls were timed. */
  count: number
  /** Their total duration, in ms. */
  sum: number
  /**
   * `[upper bound in ms, how many took at most that long]` for each of
   * `LATENCY_BUCKETS_MS`: cumulative counts, as Prometheus counts them; the
   * rest (`count` minus the last) took longer than the last bound.
   */
  buckets: Array<[number, number]>
  /** The median estimated from the buckets (the upper bound of the bucket it falls in), in ms; `null` with nothing timed or past the last bucket. */
  p50: number | null
  /** The 99th percentile, estimated as `p50` is, in ms. */
  p99: number | null
}

/**
 * What a client counted since it was made (`client.metrics()`). The fields
 * are the other fronts' (Python's `renewal_failures` is `renewalFailures`
 * here); the keys of `failed` and `lost` are the core's names, as in
 * `FenceLockError#kind` and `LockLostError#reason`. Counters only grow;
 * `held` and `waiting` are gauges (the value now).
 */
export interface Metrics {
  /** Acquire calls that returned a lock, a permit or a read or write grant. */
  acquired: number
  /** Acquire calls that failed, per error kind (`'not_acquired'`, `'timeout'`, `'cancelled'`, …: every kind, zeros included). */
  failed: Record<string, number>
  /** Held locks lost, per reason (`'deleted'`, `'taken_over'`, `'unreachable'`, `'expired'`: every reason, zeros included). */
  lost: Record<string, number>
  /** Releases that succeeded (a release that finds the lock lost does not count). */
  released: number
  /** Automatic renewals that succeeded. */
  renewals: number
  /** Automatic renewals that failed (retried until the lock is lost). */
  renewalFailures: number
  /** Locks, permits and grants held now. */
  held: number
  /** Acquire calls waiting for a lock to be free now. */
  waiting: number
  /** How long acquire calls took, in ms. */
  acquireLatency: AcquireLatency
}

/**
 * A held lock. Release it with `release()` or `await using`. A lock that is
 * garbage-collected while held stops being renewed; its key then expires at
 * its ttl.
 */
export declare class Lock implements AsyncDisposable {
  protected constructor()
  /** The fencing token: strictly greater than every earlier holder's. Pass it with every write to the protected storage. */
  readonly fencingToken: bigint
  /** What a fenced write of this holder carries: the token and this grant's holder id. */
  readonly fence: Fence
  /** The resource this lock protects (the semaphore's or read-write lock's name for one of their grants). */
  readonly resource: string
  /** Which permit (0 to `permits - 1`) this lock holds when it is a semaphore's permit; `null` for a plain lock. */
  readonly permit: number | null
  /** Whole ms the lock stays valid without another renewal; 0 when not held. */
  readonly remainingMs: number
  /** `'held'`, `'released'`, or `'lost:deleted' | 'lost:taken_over' | 'lost:unreachable' | 'lost:expired'`. */
  readonly status: string
  /** How many times the lock has been renewed. */
  readonly renewals: number
  /** Aborted (reason: a `LockLostError`) when the lock is lost; never after a clean release. */
  readonly signal: AbortSignal
  /** True while held and its validity (local monotonic clock) has not run out. */
  isHeld(): boolean
  /** Sets the ttl to `ms` from now on a majority of nodes (never re-creates a lost key: rejects with `LockLostError`). */
  extend(ms: number): Promise<void>
  /** Releases the lock on every node; rejects with `NotHeldError` if it had been lost or released before. */
  release(): Promise<void>
  /** Releases the lock unless it was released or lost already (for `await using`). */
  [Symbol.asyncDispose](): Promise<void>
}

/**
 * Leadership won by `Client#campaign`: a lock on the election's name (so it
 * is also a `Lock`), renewed while held. Its `signal` aborts (reason: a
 * `LockLostError`) when leadership is lost; `resign()` or `await using` gives
 * it up at once, and the next candidate wins.
 */
export declare class Leadership extends Lock {
  protected constructor()
  /** The election's name (the lock's `resource`). */
  readonly name: string
  /** This leader's epoch, its fencing token: strictly greater than every earlier leader's. Write with `leadership.fence`. */
  readonly epoch: bigint
  /** The value announced to observers. */
  readonly value: Buffer
  /** True while this is still the leader, as far as this process can know. */
  isLeader(): boolean
  /** Gives up leadership at once; rejects with `NotHeldError` if it had been lost or given up before. */
  resign(): Promise<void>
}

/**
 * A counting semaphore (`Client#semaphore`): at most `permits` holders at
 * once. Each permit is a `Lock` (renewed while held, its `signal` aborted
 * when it is lost, with a fencing token); release it, or `await using` it,
 * and the first waiter is woken at once. The options, `AbortSignal` and
 * errors of `acquire` and `tryAcquire` are those of `Client#acquire` and
 * `Client#tryAcquire`.
 */
export declare class Semaphore {
  private constructor()
  /** The semaphore's name. */
  readonly name: string
  /** How many holders it admits at once. */
  readonly permits: number
  /**
   * Takes a permit, waiting (woken when one is released) up to `wait` ms.
   * Rejects with `LockTimeoutError` when the wait ran out (`NotAcquiredError`
   * when `wait` is 0), `InvalidArgumentError` when the semaphore is in use
   * with another number of permits, `UnavailableError` when a majority of
   * nodes cannot be reached.
   */
  acquire(options?: AcquireOptions): Promise<Lock>
  /** One attempt: a permit, or `null` when every permit is held. */
  tryAcquire(options?: TryAcquireOptions): Promise<Lock | null>
  /** How many permits are held now (on a majority of the nodes); for monitoring, it may be out of date on arrival. */
  holders(): Promise<number>
}

/**
 * A read-write lock (`Client#rwLock`): any number of readers at once, or one
 * writer. Each reader and each writer holds a `Lock` of its own (renewed
 * while held, its `signal` aborted when it is lost, with a fencing token;
 * `resource` is the read-write lock's name); release it, or `await using`
 * it, and the next waiters are woken at once. A writer's fencing token is
 * larger than that of every reader and writer granted before it; once a
 * writer waits, readers that ask later wait behind it. The options,
 * `AbortSignal` and errors of the acquires and tries are those of
 * `Client#acquire` and `Client#tryAcquire`.
 */
export declare class RwLock {
  private constructor()
  /** The read-write lock's name. */
  readonly name: string
  /**
   * Takes the lock for reading, beside other readers, waiting (woken when a
   * writer releases) while a writer holds it or waits ahead, up to `wait` ms.
   * Rejects with `LockTimeoutError` when the wait ran out (`NotAcquiredError`
   * when `wait` is 0), `UnavailableError` when a majority of nodes cannot be
   * reached.
   */
  acquireRead(options?: AcquireOptions): Promise<Lock>
  /**
   * Takes the lock for writing, alone, waiting (woken when the holders
   * release) up to `wait` ms. Rejects as `acquireRead`.
   */
  acquireWrite(options?: AcquireOptions): Promise<Lock>
  /** One attempt to read: a reader's lock, or `null` when a writer holds the lock or waits for it. */
  tryRead(options?: TryAcquireOptions): Promise<Lock | null>
  /** One attempt to write: the writer's lock, or `null` when anyone else holds the lock. */
  tryWrite(options?: TryAcquireOptions): Promise<Lock | null>
}

/**
 * The leaders of one election (`Client#observe`), in increasing epochs: the
 * current one first, then each new one; a slow reader skips to the latest.
 * It never ends by itself: `break`, `return()`, `close()`, its `AbortSignal`
 * or the client's `close()` ends it. While a `next()` is pending it keeps the
 * process alive, as a socket does; an observation nobody reads does not.
 */
export declare class Observation implements AsyncIterable<Leader>, AsyncDisposable {
  private constructor()
  /** The next leader, or `{ done: true }` once the observation ended. */
  next(): Promise<IteratorResult<Leader, undefined>>
  /** Ends the observation (what `break` calls). */
  return(): Promise<IteratorResult<Leader, undefined>>
  /** Ends the observation now; a pending `next()` resolves `{ done: true }`. */
  close(): void
  [Symbol.asyncIterator](): Observation
  /** Ends the observation (`await using`). */
  [Symbol.asyncDispose](): Promise<void>
}

/** What one node answered in a quorum operation. */
export interface NodeReport {
  /** The node, without credentials. */
  node: string
  /** `'ok' | 'held_by_other' | 'missing' | 'timed_out' | 'failed' | 'pending'`. */
  outcome: string
  /** The node's answer in words. */
  detail: string
}

/** The codes of {@link FenceLockError}, one per kind. */
export type FenceLockErrorCode =
  | 'NOT_ACQUIRED'
  | 'TIMEOUT'
  | 'UNAVAILABLE'
  | 'LOST'
  | 'NOT_HELD'
  | 'STALE_TOKEN'
  | 'INVALID_ARGUMENT'
  | 'CONFIG'
  | 'AUTH'
  | 'TLS'
  | 'CLOSED'
  | 'WOULD_BLOCK'
  | 'INTERNAL'
  | 'FENCELOCK'

/**
 * Base class of every fencelock error. Each subclass is a core error kind,
 * named the kind in CamelCase plus `Error` (`LockTimeoutError` and
 * `LockLostError` for `timeout` and `lost`); its code is the kind in upper case.
 */
export declare class FenceLockError extends Error {
  constructor(message: string, details?: { resource?: string | null; nodes?: NodeReport[]; cause?: unknown })
  /** The core's name of this kind of failure, e.g. `'not_acquired'` (`'error'` on the base class). */
  readonly kind: string
  /** The stable code of this kind of failure. */
  readonly code: FenceLockErrorCode
  /** The resource the failed operation was about, or `null`. */
  readonly resource: string | null
  /** What each node answered (empty when no node was asked). */
  readonly nodes: NodeReport[]
}
/** The lock is held by someone else (`tryAcquire` resolves `null` instead). Code `NOT_ACQUIRED`. */
export declare class NotAcquiredError extends FenceLockError {}
/** The `wait` deadline passed before the lock could be taken. Code `TIMEOUT`. */
export declare class LockTimeoutError extends FenceLockError {}
/** Not enough nodes answered to decide: Redis unreachable, paused or erroring. Code `UNAVAILABLE`. */
export declare class UnavailableError extends FenceLockError {}
/** The lock was lost while held. Code `LOST`; `reason` says how when it comes from `lock.signal`. */
export declare class LockLostError extends FenceLockError {
  /** `'deleted' | 'taken_over' | 'unreachable' | 'expired'` (set on the signal's reason). */
  readonly reason?: string
}
/** The lock was no longer held when released or extended. Code `NOT_HELD`. */
export declare class NotHeldError extends FenceLockError {}
/** A fenced write carried a token older than the one already stored. Code `STALE_TOKEN`. */
export declare class StaleTokenError extends FenceLockError {}
/** An argument the core refused (e.g. a resource name starting with `}`). Code `INVALID_ARGUMENT`. */
export declare class InvalidArgumentError extends FenceLockError {}
/** The client configuration is invalid (bad URL, duplicate node…). Code `CONFIG`. */
export declare class ConfigError extends FenceLockError {}
/** Redis refused the credentials, or the ACL user lacks a permission. Code `AUTH`. */
export declare class AuthError extends FenceLockError {}
/** The TLS handshake or certificate verification failed. Code `TLS`. */
export declare class TlsError extends FenceLockError {}
/** The client is closed. Code `CLOSED`. */
export declare class ClosedError extends FenceLockError {}
/** A blocking call was made inside fencelock's own runtime. Code `WOULD_BLOCK`. */
export declare class WouldBlockError extends FenceLockError {}
/** An acquire stopped by its `AbortSignal` (`Client#acquire` rejects with the signal's reason instead). */
export declare class CancelledError extends FenceLockError {}
/** A bug in fencelock: a panic inside it was caught before it reached you. Code `INTERNAL`. */
export declare class InternalError extends FenceLockError {}

/** The shortest ttl accepted, in ms (10). */
export declare const MIN_TTL_MS: number
/** The longest ttl accepted, in ms (2^31 - 1). */
export declare const MAX_TTL_MS: number
/** The longest wait accepted, in ms (366 days). */
export declare const MAX_WAIT_MS: number
/** The longest resource name (and fenced key) accepted, in bytes (1024). */
export declare const MAX_RESOURCE_LEN: number
/** The longest key prefix accepted, in bytes (256). */
export declare const MAX_PREFIX_LEN: number
/** The largest clock-drift factor accepted (0.1). */
export declare const MAX_DRIFT_FACTOR: number
/** The longest value a leader may announce, in bytes (65536). */
export declare const MAX_LEADER_VALUE: number
/** The most permits a semaphore may have (256). */
export declare const MAX_PERMITS: number
/** The largest fencing token handed out (2n**53n-1n). */
export declare const MAX_FENCING_TOKEN: bigint
/**
 * Each field of `client.metrics()` → the name it is exported under
 * (Prometheus style), as `fencelock/prometheus` and the Rust core's
 * `metrics` facade report it: `fencelock_acquired_total`,
 * `fencelock_failed_total` (label `kind`), `fencelock_lost_total` (label
 * `reason`), `fencelock_released_total`, `fencelock_renewals_total`,
 * `fencelock_renewal_failures_total`, `fencelock_held`, `fencelock_waiting`
 * and `fencelock_acquire_latency_seconds` (a histogram, in seconds).
 */
export declare const METRIC_NAMES: Readonly<Record<keyof Metrics, string>>
/** The upper bounds of the acquire-latency buckets, in ms (0.5 to 10000). */
export declare const LATENCY_BUCKETS_MS: readonly number[]
/** The version of the native addon. */
export declare const VERSION: string

/** How much a record matters, most severe first: the core's levels (`LOG_LEVELS`). */
export type LogLevel = 'error' | 'warn' | 'info' | 'debug' | 'trace'

/**
 * One of the core's events, as the diagnostics channel `fencelock:log`
 * publishes it (frozen). It names nodes without their credentials and never
 * carries a lock's random token or a password.
 */
export interface LogRecord {
  /**
   * `'warn'` for a lost lock, a failed renewal, an unreachable node; `'debug'`
   * for each acquisition, release, extension and connection change; `'trace'`
   * for each renewal; `'error'` and `'info'` for rarer events.
   */
  readonly level: LogLevel
  /** The core module that emitted it, such as `'fencelock::lock_state'`. */
  readonly target: string
  /** What happened, such as `'lock lost'`. */
  readonly message: string
  /** What it happened to, such as `{ resource: 'jobs', reason: '…' }` (every value a string). */
  readonly fields: Readonly<Record<string, string>>
  /** The message followed by ` name=value` for each field: `'lock lost resource=jobs reason=…'`. */
  readonly line: string
}

/**
 * The name of the `node:diagnostics_channel` channel every record is published
 * on: `diagnostics_channel.subscribe(LOG_CHANNEL, (record) => …)` receives each
 * {@link LogRecord}. Records are also printed through
 * `util.debuglog('fencelock')` (`NODE_DEBUG=fencelock`).
 */
export declare const LOG_CHANNEL: 'fencelock:log'
/** The core's levels, most severe first: `['error', 'warn', 'info', 'debug', 'trace']`. */
export declare const LOG_LEVELS: readonly LogLevel[]
/**
 * Publishes the core's records at `level` and above from now on, in this
 * thread (the main thread and each worker have their own level): `'off'` for
 * none. The default is `'warn'`, or `'debug'` when `NODE_DEBUG` names
 * fencelock. Throws a `TypeError` for anything but a string and a
 * `RangeError` for another string.
 */
export declare function setLogLevel(level: LogLevel | 'off'): void
/** The level records are published at in this thread (`'off'` when none are). */
export declare function getLogLevel(): LogLevel | 'off'
