'use strict'

const { asyncDispose } = require('./lock.js')

const DONE = Object.freeze({ done: true, value: undefined })

/**
 * The leaders of one election, made by `Client#observe`: an async iterable
 * of `{ value: Buffer, epoch: bigint }`, starting with the current leader (if
 * any), then each new one as it announces itself; a slow reader skips to the
 * latest. It never ends by itself: `break` (or `return()`, `close()`,
 * `await using`), its `AbortSignal` or the client's `close()` ends it, and
 * the loop then finishes normally.
 *
 * It subscribes on every node from the moment it is made. While a `next()`
 * is pending (a `for await` waiting for the next leader) it keeps the
 * process alive, as an open socket does; an observation nobody is reading
 * does not.
 */
class Observation {
  /** The addon's observation, `null` once ended. */
  #native
  /** The last `next()`: the next one starts after it, as the addon reads one at a time. */
  #queue = Promise.resolve()
  #signal
  #onAbort

  /** @internal Made by the client only (`native` is `null` for an observation ended before it began). */
  constructor(native, signal) {
    this.#native = native
    if (native !== null && signal !== undefined) {
      this.#signal = signal
      this.#onAbort = () => this.close()
      signal.addEventListener('abort', this.#onAbort, { once: true })
    }
  }

  /** The next leader (`{ done: false, value: leader }`), or `{ done: true }` once ended. */
  next() {
    const step = this.#queue.then(() => this.#read())
    this.#queue = step.catch(() => {})
    return step
  }

  async #read() {
    const native = this.#native
    if (native === null) return DONE
    let leader
    try {
      leader = await native.next()
    } catch (error) {
      this.close()
      throw error
    }
    if (leader === null) {
      this.close()
      return DONE
    }
    return { done: false, value: leader }
  }

  /** Ends the observation (what `break` in `for await` calls). */
  async return() {
    this.close()
    return DONE
  }

  /**
   * Ends the observation now: its subscriptions end and a pending `next()`
   * resolves `{ done: true }`. Idempotent.
   */
  close() {
    const native = this.#native
    if (native === null) return
    this.#native = null
    this.#signal?.removeEventListener('abort', this.#onAbort)
    native.close()
  }

  [Symbol.asyncIterator]() {
    return this
  }

  /** `await using observation = client.observe(…)` ends it at block exit. */
  async [asyncDispose]() {
    this.close()
  }
}

module.exports = { Observation }
