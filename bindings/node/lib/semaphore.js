'use strict'

const { ACQUIRE_OPTIONS, TRY_OPTIONS, lockArgs } = require('./args.js')
const { toLock, cancellable } = require('./lock.js')

/**
 * A counting semaphore, made by `Client#semaphore`: at most `permits`
 * holders at once. Each permit is a `Lock` (renewed while held, its `signal`
 * aborted when it is lost, with a fencing token), whose `permit` says which
 * permit it is; release it, or `await using` it, to let the next waiter in.
 *
 * It holds the addon's semaphore in a private field; the options, the
 * `AbortSignal` and the errors of its calls are those of `Client#acquire`
 * and `Client#tryAcquire`.
 */
class Semaphore {
  #native
  #name
  #permits

  /** @internal Made by the client only. */
  constructor(nativeSemaphore, name, permits) {
    this.#native = nativeSemaphore
    this.#name = name
    this.#permits = permits
  }

  /** The semaphore's name. */
  get name() {
    return this.#name
  }

  /** How many holders it admits at once. */
  get permits() {
    return this.#permits
  }

  /**
   * Takes a permit, waiting (woken when one is released) up to `wait` ms
   * (default 10 s). Rejects with `LockTimeoutError` when the wait ran out
   * (`NotAcquiredError` when `wait` is 0), `InvalidArgumentError` when the
   * semaphore is in use with another number of permits.
   */
  acquire(options) {
    let args
    try {
      args = lockArgs(options, ACQUIRE_OPTIONS)
    } catch (error) {
      return Promise.reject(error)
    }
    if (args.signal === undefined) return this.#native.acquire(args.native).then(toLock)
    return cancellable(args.signal, (canceller) => this.#native.acquire(args.native, canceller), toLock)
  }

  /** One attempt: a permit, or `null` when every permit is held. */
  tryAcquire(options) {
    let args
    try {
      args = lockArgs(options, TRY_OPTIONS)
    } catch (error) {
      return Promise.reject(error)
    }
    return this.#native.tryAcquire(args.native).then(toLock)
  }

  /** How many permits are held now (on a majority of the nodes); for monitoring, it may be out of date on arrival. */
  holders() {
    return this.#native.holders()
  }

  [Symbol.for('nodejs.util.inspect.custom')]() {
    return `Semaphore { name: ${JSON.stringify(this.#name)}, permits: ${this.#permits} }`
  }
}

module.exports = { Semaphore }
