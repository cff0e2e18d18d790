'use strict'

const { ACQUIRE_OPTIONS, TRY_OPTIONS, lockArgs } = require('./args.js')
const { toLock, cancellable } = require('./lock.js')

/**
 * A read-write lock, made by `Client#rwLock`: any number of readers at once,
 * or one writer. Each reader and each writer holds a `Lock` of its own
 * (renewed while held, its `signal` aborted when it is lost, with a fencing
 * token; its `resource` is this lock's name); release it, or `await using`
 * it, to let the next waiter in.
 *
 * A writer's fencing token is larger than that of every reader and writer
 * granted before it. Writers are not starved: once a writer waits, readers
 * that ask later wait behind it.
 *
 * It holds the addon's read-write lock in a private field; the options, the
 * `AbortSignal` and the errors of its calls are those of `Client#acquire`
 * and `Client#tryAcquire`.
 */
class RwLock {
  #native
  #name

  /** @internal Made by the client only. */
  constructor(nativeRwLock, name) {
    this.#native = nativeRwLock
    this.#name = name
  }

  /** The read-write lock's name. */
  get name() {
    return this.#name
  }

  /**
   * Takes the lock for reading, beside other readers, waiting (woken when a
   * writer releases) while a writer holds it or waits ahead, up to `wait` ms
   * (default 10 s). Rejects with `LockTimeoutError` when the wait ran out
   * (`NotAcquiredError` when `wait` is 0).
   */
  acquireRead(options) {
    return this.#acquire(options, (native, canceller) => this.#native.acquireRead(native, canceller))
  }

  /**
   * Takes the lock for writing, alone, waiting (woken when the holders
   * release) up to `wait` ms (default 10 s). Rejects as `acquireRead`.
   */
  acquireWrite(options) {
    return this.#acquire(options, (native, canceller) => this.#native.acquireWrite(native, canceller))
  }

  /** One attempt to read: a reader's `Lock`, or `null` when a writer holds the lock or waits for it. */
  tryRead(options) {
    return this.#try(options, (native) => this.#native.tryRead(native))
  }

  /** One attempt to write: the writer's `Lock`, or `null` when anyone else holds the lock. */
  tryWrite(options) {
    return this.#try(options, (native) => this.#native.tryWrite(native))
  }

  #acquire(options, start) {
    let args
    try {
      args = lockArgs(options, ACQUIRE_OPTIONS)
    } catch (error) {
      return Promise.reject(error)
    }
    if (args.signal === undefined) return start(args.native).then(toLock)
    return cancellable(args.signal, (canceller) => start(args.native, canceller), toLock)
  }

  #try(options, start) {
    let args
    try {
      args = lockArgs(options, TRY_OPTIONS)
    } catch (error) {
      return Promise.reject(error)
    }
    return start(args.native).then(toLock)
  }

  [Symbol.for('nodejs.util.inspect.custom')]() {
    return `RwLock { name: ${JSON.stringify(this.#name)} }`
  }
}

module.exports = { RwLock }
