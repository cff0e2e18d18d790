'use strict'

// Argument checks: each throws a `TypeError` or `RangeError` naming the
// argument and describing the value it got, before anything reaches the addon.

const native = require('../native.js')

/** The core's limits: ttl, wait, resource length, drift factor, token and holder id. */
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

const ACQUIRE_OPTIONS = ['ttl', 'wait', 'signal', 'autoRenew', 'maxHold', 'maxRenewals']
const TRY_OPTIONS = ['ttl', 'autoRenew', 'maxHold', 'maxRenewals']

/** Checked lock options: `[ttl, wait, autoRenew, maxHold, maxRenewals, signal]`. */
function lockArgs(opts, allowed) {
  const o = options('options', opts, allowed)
  const maxRenewals = o.maxRenewals
  if (maxRenewals !== undefined && (!Number.isInteger(maxRenewals) || maxRenewals < 0 || maxRenewals > 0xffffffff)) {
    if (typeof maxRenewals !== 'number' || Number.isNaN(maxRenewals)) {
      throw new TypeError(`options.maxRenewals must be a number, got ${describe(maxRenewals)}`)
    }
    throw new RangeError(`options.maxRenewals must be a whole number from 0 to 4294967295, got ${maxRenewals}`)
  }
  const signal = o.signal
  if (signal !== undefined && !(signal instanceof AbortSignal)) {
    throw new TypeError(`options.signal must be an AbortSignal, got ${describe(signal)}`)
  }
  return [
    ttlArg('options.ttl', o.ttl),
    ms('options.wait', o.wait, 0, LIMITS.maxWaitMs),
    bool('options.autoRenew', o.autoRenew),
    ms('options.maxHold', o.maxHold, 0, Number.MAX_SAFE_INTEGER),
    maxRenewals,
    signal,
  ]
}

const CLIENT_OPTIONS = [
  'nodes',
  'keyPrefix',
  'nodeTimeoutMs',
  'connectTimeoutMs',
  'driftFactor',
  'retryBaseDelayMs',
  'retryMaxDelayMs',
  'defaultTtlMs',
  'defaultWaitMs',
  'autoRenew',
  'username',
  'password',
  'tlsCaPem',
  'tlsClientCertPem',
  'tlsClientKeyPem',
  'tlsMinVersion',
  'allowMixedTls',
]

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

function clientArgs(opts) {
  if (opts === undefined || opts === null || typeof opts !== 'object' || Array.isArray(opts)) {
    throw new TypeError(`new Client(options) needs an options object with nodes, got ${describe(opts)}`)
  }
  const o = options('options', opts, CLIENT_OPTIONS)
  let nodes = o.nodes
  if (typeof nodes === 'string') nodes = [nodes]
  if (!Array.isArray(nodes) || nodes.length === 0) {
    throw new TypeError(`options.nodes must be a non-empty array of redis:// URLs, got ${describe(nodes)}`)
  }
  nodes.forEach((url, i) => text(`options.nodes[${i}]`, url))
  const drift = o.driftFactor
  if (drift !== undefined) {
    if (typeof drift !== 'number' || Number.isNaN(drift)) {
      throw new TypeError(`options.driftFactor must be a number, got ${describe(drift)}`)
    }
    if (!(drift >= 0 && drift <= LIMITS.maxDriftFactor)) {
      throw new RangeError(`options.driftFactor must be from 0 to ${LIMITS.maxDriftFactor}, got ${drift}`)
    }
  }
  const keyPrefix = o.keyPrefix
  if (keyPrefix !== undefined && typeof keyPrefix !== 'string') {
    throw new TypeError(`options.keyPrefix must be a string, got ${describe(keyPrefix)}`)
  }
  return {
    nodes: [...nodes],
    keyPrefix,
    nodeTimeoutMs: ms('options.nodeTimeoutMs', o.nodeTimeoutMs, 1, LIMITS.maxWaitMs),
    connectTimeoutMs: ms('options.connectTimeoutMs', o.connectTimeoutMs, 1, LIMITS.maxWaitMs),
    driftFactor: drift,
    retryBaseDelayMs: ms('options.retryBaseDelayMs', o.retryBaseDelayMs, 1, LIMITS.maxWaitMs),
    retryMaxDelayMs: ms('options.retryMaxDelayMs', o.retryMaxDelayMs, 1, LIMITS.maxWaitMs),
    defaultTtlMs: ttlArg('options.defaultTtlMs', o.defaultTtlMs),
    defaultWaitMs: ms('options.defaultWaitMs', o.defaultWaitMs, 0, LIMITS.maxWaitMs),
    autoRenew: bool('options.autoRenew', o.autoRenew),
    username: text('options.username', o.username, { optional: true }),
    password: o.password === undefined ? undefined : text('options.password', o.password),
    tlsCaPem: pem('options.tlsCaPem', o.tlsCaPem),
    tlsClientCertPem: pem('options.tlsClientCertPem', o.tlsClientCertPem),
    tlsClientKeyPem: pem('options.tlsClientKeyPem', o.tlsClientKeyPem),
    tlsMinVersion: tlsVersion('options.tlsMinVersion', o.tlsMinVersion),
    allowMixedTls: bool('options.allowMixedTls', o.allowMixedTls),
  }
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
  clientArgs,
  tokenArg,
}
