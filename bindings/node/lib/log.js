'use strict'

// The core's events (a lock acquired, a renewal failed, a lock lost, a node
// unreachable…) in Node: each record is published on the diagnostics channel
// `fencelock:log` as a frozen `{ level, target, message, fields, line }`, and
// printed through `util.debuglog('fencelock')` (so `NODE_DEBUG=fencelock`
// shows it on stderr). Only records at the level of `setLogLevel()` and above
// leave Rust: 'warn' by default (losses, failed renewals and unreachable nodes
// always reach subscribers), 'debug' when NODE_DEBUG names fencelock.

const diagnosticsChannel = require('node:diagnostics_channel')
const util = require('node:util')
const native = require('../native.js')
const { describe } = require('./args.js')

/** The diagnostics channel every record is published on. */
const LOG_CHANNEL = 'fencelock:log'

/** The core's levels, most severe first (the number of each is its index + 1). */
const LOG_LEVELS = Object.freeze(['error', 'warn', 'info', 'debug', 'trace'])

const SETTINGS = ['off', ...LOG_LEVELS]
const channel = diagnosticsChannel.channel(LOG_CHANNEL)
const debug = util.debuglog('fencelock')

let level = debug.enabled ? 'debug' : 'warn'

function record(levelName, target, message, fields, line) {
  return Object.freeze({ level: levelName, target, message, fields: Object.freeze(fields), line })
}

function publish(entry) {
  if (channel.hasSubscribers) channel.publish(entry)
  // Arguments, never a format string: a field could hold a '%'.
  debug('%s %s: %s', entry.level, entry.target, entry.line)
}

/** Called by the addon (on this thread) with each record (`NativeLogRecord` in native.d.ts). */
function deliver(n) {
  try {
    if (n.dropped > 0) {
      // What the core says when its own queue overflows, for this thread's.
      const dropped = String(n.dropped)
      const message = 'log records dropped: the logger did not keep up'
      publish(record('warn', 'fencelock', message, { dropped }, `${message} dropped=${dropped}`))
    }
    const fields = Object.fromEntries(n.fields)
    publish(record(LOG_LEVELS[n.level - 1] ?? 'warn', n.target, n.message, fields, n.line))
  } catch (error) {
    // A subscriber's exception is rethrown by diagnostics_channel on the next
    // tick; anything else thrown here must not end the process.
    process.emitWarning(`fencelock: delivering a log record failed: ${error?.stack ?? error}`, 'FenceLockWarning')
  }
}

/** The number the addon takes for a setting: null for 'off', 1 (error) to 5 (trace). */
function levelNumber(setting) {
  const index = SETTINGS.indexOf(setting)
  return index === 0 ? null : index
}

/**
 * Forwards the core's records at `setting` and above from now on, for this
 * thread: 'off', 'error', 'warn', 'info', 'debug' or 'trace'.
 */
function setLogLevel(setting) {
  const allowed = SETTINGS.map((s) => `'${s}'`).join(', ')
  if (typeof setting !== 'string') {
    throw new TypeError(`level must be one of ${allowed}, got ${describe(setting)}`)
  }
  if (!SETTINGS.includes(setting)) {
    throw new RangeError(`level must be one of ${allowed}, got ${describe(setting)}`)
  }
  native.setLogLevel(levelNumber(setting))
  level = setting
}

/** The level records are forwarded at for this thread ('off' when none are). */
function getLogLevel() {
  return level
}

/** Starts forwarding (when the package is loaded, in each thread that loads it). */
function install() {
  try {
    native.forwardLogs(deliver, levelNumber(level))
  } catch (error) {
    level = 'off'
    process.emitWarning(`fencelock: the core's events cannot be forwarded: ${error.message}`, 'FenceLockWarning')
  }
}

module.exports = { LOG_CHANNEL, LOG_LEVELS, setLogLevel, getLogLevel, install }
