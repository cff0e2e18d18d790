'use strict'

const native = require('../native.js')
const { ttlArg } = require('./args.js')
const { NotHeldError } = require('./errors.js')
const { Fence } = require('./fence.js')
const { lostError } = require('./lost.js')

/** `Symbol.asyncDispose` (Node 20 has it; older runtimes get the registered symbol TypeScript uses). */
const asyncDispose = Symbol.asyncDispose ?? Symbol.for('Symbol.asyncDispose')

/**
 * A held lock, made by `Client#acquire` / `tryAcquire`. Release it with
 * `release()` or `await using`; if it is garbage-collected while held,
 * renewal stops and the key expires at its ttl.
 *
 * It holds the addon's lock handle in a private field: every method is a
 * call on that handle, and the handle's finalizer is what stops renewal
 * when the lock is collected.
 */
class Lock {
  #handle
  /** The fencing token, read once (it never changes). */
  #token
  /** The permit number (or `null`), read once (it never changes). */
  #permit
  /** The `Fence`, made once. */
  #fence
  /** The loss `AbortController`, made on first read of `signal`. */
  #controller

  /** @internal Made by the client only. */
  constructor(handle) {
    this.#handle = handle
  }

  /** The fencing token: strictly greater than every earlier holder's. */
  get fencingToken() {
    return (this.#token ??= native.lockFencingToken(this.#handle))
  }

  /** What a fenced write of this holder carries: `client.fencedSet(key, value, lock.fence)`. */
  get fence() {
    return (this.#fence ??= new Fence(this.fencingToken, native.lockHolder(this.#handle)))
  }

  /** The resource this lock protects (a semaphore's or read-write lock's name for one of their grants). */
  get resource() {
    return native.lockResource(this.#handle)
  }

  /** Which permit (0-based) this lock holds when it is a semaphore's permit; `null` for a plain lock. */
  get permit() {
    if (this.#permit === undefined) this.#permit = native.lockPermit(this.#handle) ?? null
    return this.#permit
  }

  /** Whole ms the lock stays valid without another renewal; 0 when not held. */
  get remainingMs() {
    return native.lockRemainingMs(this.#handle)
  }

  /** `'held'`, `'released'`, or `'lost:<reason>'`. */
  get status() {
    return native.lockStatus(this.#handle)
  }

  /** How many times the lock has been renewed. */
  get renewals() {
    return native.lockRenewals(this.#handle)
  }

  /** True while held and its validity (local monotonic clock) has not run out. */
  isHeld() {
    return native.lockIsHeld(this.#handle)
  }

  /** An `AbortSignal` aborted (reason: `LockLostError`) when the lock is lost; never after a clean release. */
  get signal() {
    if (this.#controller === undefined) {
      const controller = new AbortController()
      this.#controller = controller
      const status = this.status
      const resource = this.resource
      if (status.startsWith('lost:')) {
        controller.abort(lostError(resource, status.slice(5)))
      } else if (status === 'held') {
        // The callback holds the controller, never the lock: no cycle through the addon.
        native.lockWatchLost(this.#handle, (reason) => controller.abort(lostError(resource, reason)))
      }
    }
    return this.#controller.signal
  }

  /** Sets the ttl to `ms` from now on a majority of nodes (compare-and-pexpire). */
  extend(ms) {
    try {
      ttlArg('ms', ms)
    } catch (error) {
      return Promise.reject(error)
    }
    return native.lockExtend(this.#handle, ms)
  }

  /** Releases the lock on every node; rejects with `NotHeldError` if it was lost or released before. */
  release() {
    return native.lockRelease(this.#handle)
  }

  /** Releases the lock unless already released or lost (for `await using`). */
  async [asyncDispose]() {
    if (this.status !== 'held') return
    try {
      await native.lockRelease(this.#handle)
    } catch (error) {
      if (!(error instanceof NotHeldError)) throw error
    }
  }

  [Symbol.for('nodejs.util.inspect.custom')]() {
    const permit = this.permit === null ? '' : `, permit: ${this.permit}`
    return `Lock { resource: ${JSON.stringify(this.resource)}${permit}, fencingToken: ${this.fencingToken}n, status: '${this.status}', remainingMs: ${this.remainingMs} }`
  }
}

/** The `Lock` for a handle the addon resolved with (`null` stays `null`). */
function toLock(handle) {
  return handle === null ? null : new Lock(handle)
}

/**
 * Runs `start(canceller)` (an addon call that waits for a lock, a permit or
 * an election) under `signal`, and resolves with `wrap(handle)`. An abort
 * cancels the wait and rejects with `signal.reason`, as the platform's own
 * APIs do.
 */
async function cancellable(signal, start, wrap) {
  signal.throwIfAborted()
  const canceller = new native.Canceller()
  const onAbort = () => canceller.cancel()
  signal.addEventListener('abort', onAbort, { once: true })
  let lock
  try {
    lock = wrap(await start(canceller))
  } catch (error) {
    if (signal.aborted) throw signal.reason
    throw error
  } finally {
    signal.removeEventListener('abort', onAbort)
  }
  if (signal.aborted) {
    // The grant won the race with the abort: nobody wants this lock now.
    // Release it rather than leave its key blocking the resource for its ttl.
    lock.release().catch(() => {})
    throw signal.reason
  }
  return lock
}

module.exports = { Lock, toLock, asyncDispose, cancellable }
