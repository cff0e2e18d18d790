'use strict'

const native = require('../native.js')

/**
 * Replies are settled by fencelock's runtime thread, which then has to wake
 * this thread. When this thread sleeps, that wake-up is the most expensive
 * step of a lock operation on a small virtual machine (waking an idle CPU
 * costs a round trip through the hypervisor). So while results come in
 * fast, the event loop polls (`setImmediate`: other I/O and timers run as
 * usual) instead of sleeping between them.
 *
 * Polling starts when two batches of results arrive less than
 * `POLL_START_GAP_MS` apart, and stops as soon as no operation is pending or
 * no result came for `POLL_FOR_MS`. An application with a lock operation
 * now and then, or whose Redis is further than that, never polls. After
 * `HOT_POLLS` looks without a result, each look first yields the CPU to any
 * other thread that is ready to run (fencelock's runtime, or Redis on the
 * same machine), so a long wait does not take CPU time from the work it
 * waits for. The measurements are in docs/performance.md.
 *
 * `FENCELOCK_POLL_MS=0` in the environment turns polling off.
 */
const POLL_FOR_MS = pollSetting(process.env.FENCELOCK_POLL_MS, 1)
const POLL_START_GAP_MS = Math.min(0.25, POLL_FOR_MS)
const HOT_POLLS = 8
let settledAt = -Infinity
let polling = false
let emptyPolls = 0

/** `FENCELOCK_POLL_MS` as a number of ms from 0 to 10, or `fallback`. */
function pollSetting(text, fallback) {
  if (text === undefined || text === '') return fallback
  const value = Number(text)
  if (!(value >= 0 && value <= 10)) {
    throw new RangeError(`FENCELOCK_POLL_MS must be a number of ms from 0 to 10, got ${JSON.stringify(text)}`)
  }
  return value
}

/** Called by the addon after it settled promises. */
function keepPolling() {
  const now = performance.now()
  const fast = now - settledAt < POLL_START_GAP_MS
  settledAt = now
  emptyPolls = 0
  if (fast && !polling) {
    polling = true
    setImmediate(poll)
  }
}

function poll() {
  emptyPolls++
  const pending = native.pendingOperations(emptyPolls > HOT_POLLS)
  if (pending > 0 && performance.now() - settledAt < POLL_FOR_MS) {
    setImmediate(poll)
  } else {
    polling = false
  }
}

module.exports = { keepPolling }
