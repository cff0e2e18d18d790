'use strict'

const { LIMITS, describe, tokenArg } = require('./args.js')

/**
 * What a fenced write carries: a fencing token and the holder id of its
 * grant. Storage accepts it over an equal token only from the same grant;
 * `new Fence(token)` is a bare token (holder 0n), which writes only where
 * every stored token is older. `String(fence)` is `"token:holder"`.
 */
class Fence {
  constructor(token, holder = 0n) {
    this.token = tokenArg(token, 'token')
    this.holder = tokenArg(holder, 'holder', LIMITS.maxHolderId)
    Object.freeze(this)
  }

  /** Reads `"token:holder"` (or a bare `"token"`). */
  static parse(text) {
    if (typeof text !== 'string') throw new TypeError(`a fence's text must be a string, got ${describe(text)}`)
    const match = /^(\d+)(?::(\d+))?$/.exec(text)
    if (match === null) throw new RangeError(`'${text}' is not a fence: expected token:holder or a bare token`)
    return new Fence(BigInt(match[1]), BigInt(match[2] ?? '0'))
  }

  toString() {
    return `${this.token}:${this.holder}`
  }
}

/** A `fence` argument: a `Fence` (`lock.fence`), its text, or a bare token. */
function fenceArg(value) {
  if (value instanceof Fence) return value
  if (typeof value === 'string') return Fence.parse(value)
  return new Fence(tokenArg(value))
}

module.exports = { Fence, fenceArg }
