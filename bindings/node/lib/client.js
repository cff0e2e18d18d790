'use strict'

const native = require('../native.js')
const {
  LIMITS,
  describe,
  text,
  resourceArg,
  ACQUIRE_OPTIONS,
  TRY_OPTIONS,
  lockArgs,
  campaignArgs,
  observeArgs,
  electionArg,
  semaphoreNameArg,
  permitsArg,
  rwLockNameArg,
  clientArgs,
} = require('./args.js')
const { fenceArg } = require('./fence.js')
const { toLock, asyncDispose, cancellable } = require('./lock.js')
const { Leadership } = require('./leadership.js')
const { Observation } = require('./observation.js')
const { Semaphore } = require('./semaphore.js')
const { RwLock } = require('./rw-lock.js')
const { toMetrics } = require('./metrics.js')

/**
 * A client of one Redis node (single-node lock) or of N independent masters
 * (Redlock). Connects in the background; operations wait for it.
 */
class Client {
  #native

  /** @param {import('../index').ClientOptions} options */
  constructor(options) {
    this.#native = new native.NativeClient(clientArgs(options))
  }

  /** Takes the lock, waiting up to `wait` ms (default 10 s) while it is busy. */
  acquire(resource, options) {
    let args
    try {
      resourceArg(resource)
      args = lockArgs(options, ACQUIRE_OPTIONS)
    } catch (error) {
      return Promise.reject(error)
    }
    if (args.signal === undefined) return this.#native.acquire(resource, args.native).then(toLock)
    return cancellable(args.signal, (canceller) => this.#native.acquire(resource, args.native, canceller), toLock)
  }

  /** One attempt: the lock, or `null` when it is held elsewhere. */
  tryAcquire(resource, options) {
    let args
    try {
      resourceArg(resource)
      args = lockArgs(options, TRY_OPTIONS)
    } catch (error) {
      return Promise.reject(error)
    }
    return this.#native.tryAcquire(resource, args.native).then(toLock)
  }

  /**
   * Runs `fn(signal, lock)` while holding the lock on `resource`: `signal`
   * aborts if the lock is lost; the lock is released when `fn` returns or
   * throws. Resolves with what `fn` returns.
   */
  async using(resource, options, fn) {
    if (typeof options === 'function' && fn === undefined) {
      fn = options
      options = undefined
    }
    if (typeof fn !== 'function') throw new TypeError(`fn must be a function, got ${describe(fn)}`)
    const lock = await this.acquire(resource, options)
    let result
    try {
      result = await fn(lock.signal, lock)
    } catch (error) {
      await lock[asyncDispose]().catch(() => {})
      throw error
    }
    await lock[asyncDispose]()
    return result
  }

  /**
   * Campaigns to lead the election `name`: waits in line until elected (or
   * up to `wait` ms, then rejects with `LockTimeoutError`), announces `value`
   * to observers and resolves with the `Leadership`. An `AbortSignal` cancels
   * the wait as it cancels an acquire.
   */
  campaign(name, options) {
    let args
    try {
      electionArg(name)
      args = campaignArgs(options)
    } catch (error) {
      return Promise.reject(error)
    }
    const value = args.native.value ?? Buffer.alloc(0)
    const toLeadership = (handle) => new Leadership(handle, value)
    if (args.signal === undefined) return this.#native.campaign(name, args.native).then(toLeadership)
    return cancellable(args.signal, (canceller) => this.#native.campaign(name, args.native, canceller), toLeadership)
  }

  /**
   * Follows the election `name`: an async iterable of its leaders
   * (`{ value, epoch }`), the current one first. Throws at once for a bad
   * name (`TypeError`/`RangeError`) or a closed client (`ClosedError`).
   * `break`, `options.signal` or `close()` ends it.
   */
  observe(name, options) {
    electionArg(name)
    const { signal } = observeArgs(options)
    if (signal?.aborted) return new Observation(null)
    return new Observation(this.#native.observe(name), signal)
  }

  /**
   * The counting semaphore `name` with `permits` permits (1 to
   * `MAX_PERMITS`): at most that many holders at once, each holding a
   * `Lock`. No I/O. Every client of a semaphore must give the same number of
   * permits while it is in use (acquire rejects with `InvalidArgumentError`
   * otherwise). Throws at once for a bad name or number of permits
   * (`TypeError`/`RangeError`, or `InvalidArgumentError` for a name only
   * the core refuses).
   */
  semaphore(name, permits) {
    semaphoreNameArg(name)
    permitsArg(permits)
    return new Semaphore(this.#native.semaphore(name, permits), name, permits)
  }

  /**
   * The read-write lock `name`: any number of readers at once, or one
   * writer, each holding a `Lock`. No I/O. Throws at once for a bad name
   * (`TypeError`/`RangeError`, or `InvalidArgumentError` for a name only the
   * core refuses).
   */
  rwLock(name) {
    rwLockNameArg(name)
    return new RwLock(this.#native.rwLock(name), name)
  }

  /**
   * Writes `value` to the Redis hash `key` on the first node only if `fence`
   * (`lock.fence`) is newer than the last write's: a larger token, or the
   * same token from the same grant. A bare token (bigint) writes only where
   * every stored token is older. Otherwise rejects with `StaleTokenError`.
   */
  fencedSet(key, value, fence) {
    let checked
    try {
      text('key', key, { maxBytes: LIMITS.maxResourceLen })
      if (typeof value !== 'string') throw new TypeError(`value must be a string, got ${describe(value)}`)
      checked = fenceArg(fence)
    } catch (error) {
      return Promise.reject(error)
    }
    return this.#native.fencedSet(key, value, checked.token, checked.holder)
  }

  /** Reads what `fencedSet` stored: `{ value, fencingToken }`, or `null`. */
  fencedGet(key) {
    try {
      text('key', key, { maxBytes: LIMITS.maxResourceLen })
    } catch (error) {
      return Promise.reject(error)
    }
    return this.#native.fencedGet(key)
  }

  /** Each node's view of `resource`: held, ttl, fencing counter (for operators). */
  inspect(resource) {
    try {
      resourceArg(resource)
    } catch (error) {
      return Promise.reject(error)
    }
    return this.#native.inspect(resource)
  }

  /**
   * What this client counted since it was made, as a plain object (no I/O;
   * also after `close()`): `acquired`, `failed` and `lost` (counts by the
   * core's kind and reason names), `released`, `renewals`, `renewalFailures`,
   * the gauges `held` and `waiting`, and `acquireLatency` (`count`, `sum` in
   * ms, `buckets` as `[upper bound ms, cumulative count]` pairs, `p50`/`p99`
   * in ms or `null`).
   */
  metrics() {
    return toMetrics(this.#native.metrics())
  }

  /**
   * Refuses new operations (they reject with `ClosedError`) and ends every
   * open observation. Held locks and leaderships can still be released.
   * Nothing keeps the process alive afterwards.
   */
  async close() {
    this.#native.close()
  }

  /** `await using client = new Client(…)` closes it at block exit. */
  [asyncDispose]() {
    return this.close()
  }
}

module.exports = { Client }
