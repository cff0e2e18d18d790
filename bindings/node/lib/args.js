'use strict'

// Argument checks: each throws a `TypeError` or `RangeError` naming the
// argument and describing the value it got, before anything reaches the addon.

const native = require('../native.js')

/** The core's limits: ttl, wait, resource length, drift factor, token, holder id, leader value and permits. */
const LIMITS = native.limits()

function describe(value) {
  if (value === null) return 'null'
  if (typeof value === 'string')
    return `the string ${JSON.stringify(value.length > 40 ? value.slice(0, 40) + '…' : value)}`
  if (typeof value === 'bigint') return `the bigint ${value}n`
  if (typeof value === 'number') return String(value)
  return `a value of type ${typeof value}`
}

/** A whole number of milliseconds in `[min, max]`, or `undefined` if absent. */
function ms(name, value, min, max) {
  if (value === undefined) return undefined
  if (typeof value !== 'number' || Number.isNaN(value)) {
    throw new TypeError(`${name} must be a number of milliseconds, got ${describe(value)}`)
  }
  if (!Number.isInteger(value) || value < min || value > max) {
    throw new RangeError(`${name} must be a whole number of milliseconds from ${min} to ${max}, got ${value}`)
  }
  return value
}

function ttlArg(name, value) {
  return ms(name, value, LIMITS.minTtlMs, LIMITS.maxTtlMs)
}

function bool(name, value) {
  if (value !== undefined && typeof value !== 'boolean') {
    throw new TypeError(`${name} must be a boolean, got ${describe(value)}`)
  }
  return value
}

function text(name, value, { optional = false, maxBytes = Infinity } = {}) {
  if (value === undefined && optional) return undefined
  if (typeof value !== 'string') throw new TypeError(`${name} must be a string, got ${describe(value)}`)
  if (value.length === 0) throw new RangeError(`${name} must not be empty`)
  // Each UTF-16 unit is at most 3 bytes of UTF-8: count only when it could matter.
  if (value.length * 3 > maxBytes && Buffer.byteLength(value) > maxBytes) {
    throw new RangeError(`${name} is ${Buffer.byteLength(value)} bytes long; the limit is ${maxBytes} bytes`)
  }
  return value
}

function resourceArg(resource) {
  return text('resource', resource, { maxBytes: LIMITS.maxResourceLen })
}

function options(name, value, allowed) {
  if (value === undefined || value === null) return {}
  if (typeof value !== 'object' || Array.isArray(value)) {
    throw new TypeError(`${name} must be an object, got ${describe(value)}`)
  }
  for (const key in value) {
    if (!allowed.includes(key)) {
      throw new TypeError(`${name}.${key} is not an option; use ${allowed.join(', ')}`)
    }
  }
  return value
}

function renewalCount(name, value) {
  if (value === undefined || (Number.isInteger(value) && value >= 0 && value <= 0xffffffff)) return value
  if (typeof value !== 'number' || Number.isNaN(value)) {
    throw new TypeError(`${name} must be a number, got ${describe(value)}`)
  }
  throw new RangeError(`${name} must be a whole number from 0 to 4294967295, got ${value}`)
}

function abortSignal(name, value) {
  if (value !== undefined && !(value instanceof AbortSignal)) {
    throw new TypeError(`${name} must be an AbortSignal, got ${describe(value)}`)
  }
  return value
}

// Each option table maps an option's public name to its check and to the
// field of the native addon's options object it fills (`native.d.ts`).

/** The options of one acquire. */
const LOCK_OPTIONS = {
  ttl: ['ttlMs', ttlArg],
  wait: ['waitMs', (name, value) => ms(name, value, 0, LIMITS.maxWaitMs)],
  autoRenew: ['autoRenew', bool],
  maxHold: ['maxHoldMs', (name, value) => ms(name, value, 0, Number.MAX_SAFE_INTEGER)],
  maxRenewals: ['maxRenewals', renewalCount],
  fair: ['fair', bool],
}

const ACQUIRE_OPTIONS = [...Object.keys(LOCK_OPTIONS), 'signal']
const TRY_OPTIONS = ACQUIRE_OPTIONS.filter((name) => name !== 'wait' && name !== 'signal')

/**
 * What a leader announces: a string (as UTF-8) or bytes, copied so that a
 * later change to the caller's buffer changes nothing. Its length is the
 * core's to check (`InvalidArgumentError` over `MAX_LEADER_VALUE` bytes).
 */
function leaderValue(name, value) {
  if (value === undefined) return undefined
  if (typeof value === 'string') return Buffer.from(value, 'utf8')
  if (value instanceof Uint8Array) return Buffer.from(value)
  throw new TypeError(`${name} must be a string or a Buffer/Uint8Array, got ${describe(value)}`)
}

/**
 * The options of one campaign: a lock's ttl and wait (an absent wait waits
 * until elected), and the value announced to observers.
 */
const CAMPAIGN_OPTIONS = { ttl: LOCK_OPTIONS.ttl, wait: LOCK_OPTIONS.wait, value: ['value', leaderValue] }

const CAMPAIGN_ALLOWED = [...Object.keys(CAMPAIGN_OPTIONS), 'signal']

/** Checks `opts` against `table` and returns the native options object it describes. */
function checked(opts, table, allowed) {
  const given = options('options', opts, allowed)
  const out = {}
  for (const name in table) {
    const [field, check] = table[name]
    out[field] = check(`options.${name}`, given[name])
  }
  return out
}

/** Checked lock options: `{ native, signal }`, `native` for the addon. */
function lockArgs(opts, allowed) {
  const native = checked(opts, LOCK_OPTIONS, allowed)
  return { native, signal: abortSignal('options.signal', opts?.signal) }
}

/** Checked campaign options: `{ native, signal }`, `native` for the addon (`native.value` a Buffer copy or absent). */
function campaignArgs(opts) {
  const native = checked(opts, CAMPAIGN_OPTIONS, CAMPAIGN_ALLOWED)
  return { native, signal: abortSignal('options.signal', opts?.signal) }
}

/** Checked observe options: `{ signal }`. */
function observeArgs(opts) {
  const given = options('options', opts, ['signal'])
  return { signal: abortSignal('options.signal', given.signal) }
}

/** The name of an election: checked as a resource is, and named `name` in errors. */
function electionArg(name) {
  return text('name', name, { maxBytes: LIMITS.maxResourceLen })
}

/** The name of a semaphore: checked as a resource is, and named `name` in errors. */
function semaphoreNameArg(name) {
  return text('name', name, { maxBytes: LIMITS.maxResourceLen })
}

/** The name of a read-write lock: checked as a resource is, and named `name` in errors. */
function rwLockNameArg(name) {
  return text('name', name, { maxBytes: LIMITS.maxResourceLen })
}

/** The number of permits of a semaphore: a whole number from 1 to `MAX_PERMITS`. */
function permitsArg(value) {
  if (typeof value !== 'number' || Number.isNaN(value)) {
    throw new TypeError(`permits must be a number, got ${describe(value)}`)
  }
  if (!Number.isInteger(value) || value < 1 || value > LIMITS.maxPermits) {
    throw new RangeError(`permits must be a whole number from 1 to ${LIMITS.maxPermits}, got ${value}`)
  }
  return value
}

const TLS_VERSIONS = ['1.2', '1.3']

function tlsVersion(name, value) {
  if (value === undefined) return undefined
  if (typeof value !== 'string') {
    throw new TypeError(`${name} must be the string '1.2' or '1.3', got ${describe(value)}`)
  }
  if (!TLS_VERSIONS.includes(value)) throw new RangeError(`${name} must be '1.2' or '1.3', got ${describe(value)}`)
  return value
}

function pem(name, value) {
  if (value === undefined) return undefined
  if (Buffer.isBuffer(value)) return value.toString('utf8')
  return text(name, value)
}

function nodeUrls(name, value) {
  const nodes = typeof value === 'string' ? [value] : value
  if (!Array.isArray(nodes) || nodes.length === 0) {
    throw new TypeError(`${name} must be a non-empty array of redis:// URLs, got ${describe(nodes)}`)
  }
  nodes.forEach((url, i) => text(`${name}[${i}]`, url))
  return [...nodes]
}

function driftFactor(name, value) {
  if (value === undefined) return undefined
  if (typeof value !== 'number' || Number.isNaN(value)) {
    throw new TypeError(`${name} must be a number, got ${describe(value)}`)
  }
  if (!(value >= 0 && value <= LIMITS.maxDriftFactor)) {
    throw new RangeError(`${name} must be from 0 to ${LIMITS.maxDriftFactor}, got ${value}`)
  }
  return value
}

function keyPrefix(name, value) {
  if (value !== undefined && typeof value !== 'string') {
    throw new TypeError(`${name} must be a string, got ${describe(value)}`)
  }
  return value
}

const timeout = (name, value) => ms(name, value, 1, LIMITS.maxWaitMs)

/** The options of `new Client()`; each fills the native field of its own name. */
const CLIENT_OPTIONS = Object.fromEntries(
  Object.entries({
    nodes: nodeUrls,
    keyPrefix,
    nodeTimeoutMs: timeout,
    connectTimeoutMs: timeout,
    driftFactor,
    retryBaseDelayMs: timeout,
    retryMaxDelayMs: timeout,
    defaultTtlMs: ttlArg,
    defaultWaitMs: (name, value) => ms(name, value, 0, LIMITS.maxWaitMs),
    autoRenew: bool,
    username: (name, value) => text(name, value, { optional: true }),
    password: (name, value) => (value === undefined ? undefined : text(name, value)),
    tlsCaPem: pem,
    tlsClientCertPem: pem,
    tlsClientKeyPem: pem,
    tlsMinVersion: tlsVersion,
    allowMixedTls: bool,
  }).map(([name, check]) => [name, [name, check]]),
)

function clientArgs(opts) {
  if (opts === undefined || opts === null || typeof opts !== 'object' || Array.isArray(opts)) {
    throw new TypeError(`new Client(options) needs an options object with nodes, got ${describe(opts)}`)
  }
  return checked(opts, CLIENT_OPTIONS, Object.keys(CLIENT_OPTIONS))
}

function tokenArg(value, name = 'fencingToken', max = 0xffffffffffffffffn) {
  if (typeof value === 'bigint') {
    if (value < 0n || value > max) {
      throw new RangeError(`${name} must be from 0n to ${max}n, got ${value}n`)
    }
    return value
  }
  if (typeof value === 'number' && Number.isSafeInteger(value) && value >= 0) return BigInt(value)
  if (typeof value === 'number' && !Number.isNaN(value)) {
    throw new RangeError(`${name} must be a non-negative whole number (use the lock's bigint), got ${value}`)
  }
  throw new TypeError(`${name} must be a bigint (lock.fencingToken), got ${describe(value)}`)
}

module.exports = {
  LIMITS,
  describe,
  ttlArg,
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
  tokenArg,
}
