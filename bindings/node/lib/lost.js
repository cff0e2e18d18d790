'use strict'

// A lock's loss as JavaScript sees it: the `LockLostError` that `lock.signal`
// aborts with, and what happens when a lost-lock callback throws.

const native = require('../native.js')
const { LockLostError } = require('./errors.js')

/** An exception thrown inside a callback the addon ran: reported, never fatal. */
function reportError(error) {
  process.emitWarning(
    `fencelock: a lost-lock callback threw: ${error && error.stack ? error.stack : error}`,
    'FenceLockWarning',
  )
}

function lostError(resource, reason) {
  const error = new LockLostError(`lock '${resource}' was lost: ${native.lossReasonText(reason)}`, { resource })
  error.reason = reason
  return error
}

module.exports = { lostError, reportError }
