'use strict'

const { Lock } = require('./lock.js')

/**
 * Leadership won by `Client#campaign`: a lock on the election's name, so it
 * renews, is lost and is given up exactly as a `Lock` is (its `signal`
 * aborts with a `LockLostError` when it is lost, `await using` resigns).
 * The epoch is the lock's fencing token: pass `leadership.fence` with what
 * the leader writes, so a deposed leader's late writes are refused.
 */
class Leadership extends Lock {
  /** The value announced to observers (a Buffer the client owns). */
  #value

  /** @internal Made by the client only. */
  constructor(handle, value) {
    super(handle)
    this.#value = value
  }

  /** The election's name. */
  get name() {
    return this.resource
  }

  /** This leader's epoch (its fencing token): strictly greater than every earlier leader's. */
  get epoch() {
    return this.fencingToken
  }

  /** The value announced to observers, as bytes. */
  get value() {
    return this.#value
  }

  /** True while this is still the leader, as far as this process can know (as `isHeld()`). */
  isLeader() {
    return this.isHeld()
  }

  /**
   * Gives up leadership at once (releases the election's lock): the next
   * candidate in line wins. Rejects with `NotHeldError` if leadership had
   * been lost or given up before.
   */
  resign() {
    return this.release()
  }

  [Symbol.for('nodejs.util.inspect.custom')]() {
    return `Leadership { name: ${JSON.stringify(this.name)}, epoch: ${this.epoch}n, value: <${this.#value.length} bytes>, status: '${this.status}' }`
  }
}

module.exports = { Leadership }
