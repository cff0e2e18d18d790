'use strict'

// The core's events in Node (issue 21): records on the diagnostics channel
// `fencelock:log` with their level, target, fields and line; setLogLevel and
// its checks; NODE_DEBUG=fencelock; never a password or a lock token in any
// record (as core/tests/log_forward.rs checks for Rust); and a process that
// forwards records still exits by itself.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const diagnosticsChannel = require('node:diagnostics_channel')
const { spawn } = require('node:child_process')
const fencelock = require('fencelock')
const { Client, LOG_CHANNEL, LOG_LEVELS, setLogLevel, getLogLevel } = fencelock
const { RedisNodes, unique, eventually, PACKAGE } = require('./helpers.js')
const PASSWORD = 'pw-SECRET-4711'

let nodes
let urls
/** A user `app` whose password is PASSWORD, on node `i`. */
function addUser(i) {
  return nodes.call(i, 'ACL', 'SETUSER', 'app', 'on', `>${PASSWORD}`, '~*', '&*', '+@all')
}

before(async () => {
  nodes = await RedisNodes.start(3)
  for (let i = 0; i < 3; i++) await addUser(i)
  urls = nodes.urls.map((url) => url.replace('redis://', `redis://app:${PASSWORD}@`))
})
after(async () => {
  await nodes.stop()
})

/** Every record published from now on, until `stop()`. */
function capture() {
  const records = []
  const onRecord = (record) => records.push(record)
  diagnosticsChannel.subscribe(LOG_CHANNEL, onRecord)
  return {
    records,
    stop: () => diagnosticsChannel.unsubscribe(LOG_CHANNEL, onRecord),
    async find(match, what) {
      let found
      await eventually(() => (found = records.find(match)) !== undefined, { timeoutMs: 5000 }).catch(() => {
        throw new Error(`no record ${what}; got:\n${records.map((r) => `${r.level} ${r.line}`).join('\n')}`)
      })
      return found
    },
  }
}

const lockKey = (resource) => `fencelock:{${resource}}`
const pause = (ms) => new Promise((resolve) => setTimeout(resolve, ms))
/** Lets records already emitted reach the channel. */
const settle = () => pause(300)

function assertNoSecret(records, ...secrets) {
  assert.ok(records.length > 0)
  for (const record of records) {
    const text = JSON.stringify(record)
    for (const secret of secrets) assert.ok(!text.includes(secret), `a secret reached a record: ${text}`)
  }
}

function lost(lock) {
  return new Promise((resolve) => {
    if (lock.signal.aborted) resolve()
    else lock.signal.addEventListener('abort', resolve, { once: true })
  })
}

test('records reach the channel with their level and fields, and never a secret', async () => {
  const seen = capture()
  setLogLevel('trace')
  await nodes.kill(2)
  const client = new Client({ nodes: urls })
  try {
    const resource = unique('log')
    const lock = await client.acquire(resource, { ttl: 300 })
    const token = await nodes.call(0, 'GET', lockKey(resource))
    assert.match(token, /^[0-9a-f]+$/)

    const acquired = await seen.find((r) => r.message === 'lock acquired', "'lock acquired'")
    assert.equal(acquired.level, 'debug')
    assert.equal(acquired.fields.resource, resource)
    assert.ok(acquired.target.startsWith('fencelock::'), acquired.target)
    assert.ok(acquired.line.startsWith(`lock acquired resource=${resource}`), acquired.line)
    assert.ok(Object.isFrozen(acquired) && Object.isFrozen(acquired.fields))
    assert.deepEqual(Object.keys(acquired).sort(), ['fields', 'level', 'line', 'message', 'target'])
    // A renewal or two, at trace.
    await seen.find((r) => r.level === 'trace', 'at trace')

    await nodes.call(0, 'DEL', lockKey(resource))
    await nodes.call(1, 'DEL', lockKey(resource))
    await lost(lock)
    const loss = await seen.find((r) => r.message === 'lock lost', "'lock lost'")
    assert.equal(loss.level, 'warn')
    assert.equal(loss.target, 'fencelock::lock_state')
    assert.equal(loss.fields.resource, resource)
    assert.ok(loss.fields.reason)
    assert.equal(loss.line, `lock lost resource=${resource} reason=${loss.fields.reason}`)
    const unreachable = nodes.urls[2].replace('redis://', '')
    await seen.find((r) => r.level === 'warn' && r.line.includes(unreachable), 'naming the unreachable node')
    await lock.release().catch(() => {})
    await settle()
    for (const record of seen.records) assert.ok(LOG_LEVELS.includes(record.level), record.level)
    assertNoSecret(seen.records, PASSWORD, token)
  } finally {
    seen.stop()
    await client.close()
    await nodes.restart(2)
    await addUser(2)
  }
})

test("setLogLevel('warn') hides debug records, 'off' hides all", async () => {
  const client = new Client({ nodes: urls })
  const seen = capture()
  try {
    setLogLevel('debug')
    assert.equal(getLogLevel(), 'debug')
    const first = unique('log')
    await (await client.acquire(first)).release()
    await seen.find((r) => r.level === 'debug' && r.fields.resource === first, 'at debug')

    setLogLevel('warn')
    assert.equal(getLogLevel(), 'warn')
    await settle()
    seen.records.length = 0
    const resource = unique('log')
    const lock = await client.acquire(resource, { ttl: 1000 })
    const token = await nodes.call(0, 'GET', lockKey(resource))
    for (let i = 0; i < 3; i++) await nodes.call(i, 'DEL', lockKey(resource))
    await lost(lock)
    await seen.find((r) => r.message === 'lock lost' && r.fields.resource === resource, "'lock lost' at warn")
    await settle()
    assert.deepEqual(
      seen.records.filter((r) => r.level !== 'warn' && r.level !== 'error'),
      [],
      'a record below warn was published',
    )
    assertNoSecret(seen.records, PASSWORD, token)

    setLogLevel('off')
    assert.equal(getLogLevel(), 'off')
    seen.records.length = 0
    const silent = unique('log')
    const quiet = await client.acquire(silent, { ttl: 1000 })
    for (let i = 0; i < 3; i++) await nodes.call(i, 'DEL', lockKey(silent))
    await lost(quiet)
    await settle()
    assert.deepEqual(seen.records, [])
  } finally {
    seen.stop()
    setLogLevel('warn')
    await client.close()
  }
})

test('setLogLevel refuses anything but a level name', () => {
  const before = getLogLevel()
  for (const bad of [undefined, null, 3, true, {}, Symbol('debug')]) {
    assert.throws(
      () => setLogLevel(bad),
      (error) => {
        assert.ok(error instanceof TypeError, String(error))
        assert.match(error.message, /^level must be one of 'off', 'error', 'warn', 'info', 'debug', 'trace', got /)
        return true
      },
    )
  }
  for (const bad of ['', 'verbose', 'DEBUG', 'warning', ' warn']) {
    assert.throws(
      () => setLogLevel(bad),
      (error) => {
        assert.ok(error instanceof RangeError, String(error))
        assert.ok(error.message.includes(`got the string ${JSON.stringify(bad)}`), error.message)
        return true
      },
    )
  }
  assert.equal(getLogLevel(), before)
  assert.equal(LOG_CHANNEL, 'fencelock:log')
  assert.ok(Object.isFrozen(LOG_LEVELS))
})

/** Runs `script` in a child node; resolves how it ended. */
function runNode(script, { env = {}, deadlineMs = 15000 } = {}) {
  return new Promise((resolve, reject) => {
    const childEnv = { ...process.env, ...env }
    if (env.NODE_DEBUG === undefined) delete childEnv.NODE_DEBUG
    const child = spawn(process.execPath, ['-e', script], { env: childEnv, stdio: ['ignore', 'pipe', 'pipe'] })
    let out = ''
    let err = ''
    let closedAt = null
    child.stdout.on('data', (d) => {
      out += d
      if (closedAt === null && out.includes('closed')) closedAt = process.hrtime.bigint()
    })
    child.stderr.on('data', (d) => (err += d))
    const timer = setTimeout(() => child.kill('SIGKILL'), deadlineMs)
    child.on('error', reject)
    child.on('exit', (code, signal) => {
      clearTimeout(timer)
      const exitMs = closedAt === null ? null : Number(process.hrtime.bigint() - closedAt) / 1e6
      resolve({ code, signal, out, err, exitMs })
    })
  })
}

test("the default level is 'warn'; NODE_DEBUG=fencelock makes it 'debug' and prints records", async () => {
  const script = `
    const fencelock = require(${JSON.stringify(PACKAGE)})
    console.log('level ' + fencelock.getLogLevel())
    const client = new fencelock.Client({ nodes: ${JSON.stringify(urls)} })
    ;(async () => {
      await (await client.acquire('log-debug-env:' + process.pid)).release()
      await new Promise((r) => setTimeout(r, 300))
      await client.close()
    })()
  `
  const plain = await runNode(script)
  assert.equal(plain.code, 0, plain.err)
  assert.match(plain.out, /^level warn$/m)
  assert.ok(!plain.err.includes('FENCELOCK'), plain.err)

  const debug = await runNode(script, { env: { NODE_DEBUG: 'http,fencelock' } })
  assert.equal(debug.code, 0, debug.err)
  assert.match(debug.out, /^level debug$/m)
  assert.match(debug.err, /^FENCELOCK \d+: debug fencelock::acquire: lock acquired resource=log-debug-env:\d+ /m)
  assert.ok(!debug.err.includes(PASSWORD), debug.err)
})

test('a process that forwards records still exits by itself', async () => {
  const script = `
    const diagnosticsChannel = require('node:diagnostics_channel')
    const fencelock = require(${JSON.stringify(PACKAGE)})
    let count = 0
    diagnosticsChannel.subscribe(fencelock.LOG_CHANNEL, () => { count += 1 })
    fencelock.setLogLevel('trace')
    const client = new fencelock.Client({ nodes: ${JSON.stringify(urls)} })
    ;(async () => {
      const lock = await client.acquire('log-exit:' + process.pid, { ttl: 300 })
      globalThis.keep = lock
      await new Promise((r) => setTimeout(r, 400)) // renewals, logged at trace
      await client.close()
      if (count === 0) throw new Error('no record was published')
      console.log('closed')
    })().catch((e) => { console.error(e); process.exitCode = 3 })
  `
  const result = await runNode(script)
  assert.equal(result.signal, null, 'killed at the deadline: something kept the process alive')
  assert.equal(result.code, 0, result.err)
  assert.ok(result.exitMs !== null && result.exitMs < 5000, `exited ${result.exitMs} ms after close()`)

  // Loaded and never used: nothing to wait for.
  const idle = await runNode(`require(${JSON.stringify(PACKAGE)}).setLogLevel('trace'); console.log('closed')`)
  assert.equal(idle.code, 0, idle.err)
  assert.ok(idle.exitMs < 5000)
})

test('each worker receives records at its own level, and a terminated one stops nothing', async () => {
  const script = `
    const { Worker } = require('node:worker_threads')
    const diagnosticsChannel = require('node:diagnostics_channel')
    const fencelock = require(${JSON.stringify(PACKAGE)})
    const nodes = ${JSON.stringify(urls)}
    const seen = []
    diagnosticsChannel.subscribe(fencelock.LOG_CHANNEL, (r) => seen.push(r))
    const workerCode = \`
      const { parentPort, workerData } = require('node:worker_threads')
      const diagnosticsChannel = require('node:diagnostics_channel')
      const fencelock = require(workerData.pkg)
      fencelock.setLogLevel('debug')
      // Records arrive on an unref'd channel: without this timer the worker may
      // finish its acquire and exit before the record is delivered.
      const keepAlive = setInterval(() => {}, 1000)
      diagnosticsChannel.subscribe(fencelock.LOG_CHANNEL, (r) => {
        if (r.message === 'lock acquired' && r.fields.resource === workerData.resource) {
          parentPort.postMessage('seen')
          clearInterval(keepAlive)
        }
      })
      const client = new fencelock.Client({ nodes: workerData.nodes })
      client.acquire(workerData.resource).then((lock) => { globalThis.keep = lock })
    \`
    ;(async () => {
      const resource = 'log-worker:' + process.pid
      const worker = new Worker(workerCode, { eval: true, workerData: { pkg: ${JSON.stringify(PACKAGE)}, nodes, resource } })
      await new Promise((resolve, reject) => {
        worker.once('message', resolve)
        worker.once('error', reject)
        worker.once('exit', (code) => reject(new Error('worker exited with ' + code + ' before its record arrived')))
      })
      await worker.terminate()
      // This thread stayed at 'warn': the worker's debug records were not published here.
      if (seen.some((r) => r.level === 'debug')) throw new Error('a debug record reached the main thread')
      fencelock.setLogLevel('debug')
      const client = new fencelock.Client({ nodes })
      await (await client.acquire(resource + ':main')).release()
      for (let i = 0; i < 200 && !seen.some((r) => r.fields.resource === resource + ':main'); i++) {
        await new Promise((r) => setTimeout(r, 10))
      }
      await client.close()
      if (!seen.some((r) => r.message === 'lock acquired' && r.fields.resource === resource + ':main')) {
        throw new Error('no record after the worker was terminated')
      }
      console.log('closed')
    })().catch((e) => { console.error(e); process.exitCode = 2 })
  `
  const result = await runNode(script, { deadlineMs: 30000 })
  assert.equal(result.signal, null, 'killed at the deadline')
  assert.equal(result.code, 0, result.err)
  assert.match(result.out, /closed/)
})
