'use strict'

// The process exits by itself after `client.close()`: nothing the addon made
// (threadsafe functions, lost-lock watchers, observations, the runtime's
// threads) keeps the event loop alive. Each scenario runs in a child process; the deadline is
// generous (the exit is normally immediate), so a slow machine does not fail it.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const { RedisNodes, PACKAGE } = require('./helpers.js')
const DEADLINE_MS = 15000

let nodes
before(async () => {
  nodes = await RedisNodes.start(1)
})
after(async () => {
  await nodes.stop()
})

/** Runs `body` (an async function body with `client` and `fencelock` in scope) in a child; resolves how it ended. */
function runChild(body) {
  const script = `
    const fencelock = require(${JSON.stringify(PACKAGE)})
    const client = new fencelock.Client({ nodes: ${JSON.stringify(nodes.urls)} })
    ;(async () => { ${body} })().then(() => console.log('closed'), (e) => { console.error(e); process.exitCode = 3 })
  `
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    let closedAt = null
    child.stdout.on('data', (d) => {
      out += d
      if (closedAt === null && out.includes('closed')) closedAt = process.hrtime.bigint()
    })
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      resolve({ code: null, timedOut: true, out })
    }, DEADLINE_MS)
    child.on('error', reject)
    child.on('exit', (code, signal) => {
      clearTimeout(timer)
      const exitMs = closedAt === null ? null : Number(process.hrtime.bigint() - closedAt) / 1e6
      resolve({ code, signal, timedOut: false, out, exitMs })
    })
  })
}

const scenarios = {
  'acquire and release': `
    const lock = await client.acquire('exit:a')
    await lock.release()
    await client.close()`,
  'a lock still held (auto-renewing) with its signal watched': `
    const lock = await client.acquire('exit:b', { ttl: 1000 })
    lock.signal.addEventListener('abort', () => {})
    globalThis.keep = lock
    await client.close()`,
  'a rejected promise left unawaited and an idle client': `
    const lock = await client.acquire('exit:c')
    client.acquire('exit:c', { wait: 0 }).catch(() => {})
    await client.tryAcquire('exit:c')
    await lock.release()
    await client.close()`,
  'close() without any operation': `
    await client.close()`,
  'a leadership held with its signal watched, and an observation nobody reads': `
    const leadership = await client.campaign('exit:d', { ttl: 1000 })
    leadership.signal.addEventListener('abort', () => {})
    globalThis.keep = [leadership, client.observe('exit:d')]
    await client.close()`,
  'a for await over an observation, ended by close()': `
    await client.campaign('exit:e', { ttl: 1000 })
    let seen = 0
    const loop = (async () => { for await (const leader of client.observe('exit:e')) seen += 1 })()
    while (seen === 0) await new Promise((r) => setTimeout(r, 10))
    await client.close()
    await loop`,
}

for (const [name, body] of Object.entries(scenarios)) {
  test(`the process exits by itself after close(): ${name}`, async (t) => {
    const result = await runChild(body)
    // Reported, not asserted: the machine's load decides the exact figure.
    t.diagnostic(`exited ${result.exitMs?.toFixed(1)} ms after printing 'closed'`)
    assert.equal(result.timedOut, false, 'the child did not exit by itself')
    assert.equal(result.code, 0)
    assert.match(result.out, /closed/)
  })
}

test('an observation being read keeps the process alive until close() ends it, as a socket does', async () => {
  // The timer is unreferenced: it fires only if the waiting observation keeps
  // the event loop alive; otherwise the process exits early, never printing.
  const result = await runChild(`
    const loop = (async () => { for await (const leader of client.observe('exit:f')) {} })()
    setTimeout(() => client.close(), 300).unref()
    await loop`)
  assert.equal(result.timedOut, false, 'the child did not exit by itself after close()')
  assert.equal(result.code, 0)
  assert.match(result.out, /closed/, 'the process exited while its observation was waiting')
})

test("an unhandled rejection of a user promise is the user's: the addon creates none of its own", async () => {
  // A client whose nodes are all unreachable: the connection fails in the
  // background, and nothing rejects unless the user asks for something.
  const script = `
    const { Client } = require(${JSON.stringify(PACKAGE)})
    const client = new Client({ nodes: ['redis://127.0.0.1:1'], connectTimeoutMs: 50 })
    setTimeout(() => client.close().then(() => console.log('closed')), 200)
  `
  const result = await new Promise((resolve) => {
    const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    child.stdout.on('data', (d) => (out += d))
    const timer = setTimeout(() => child.kill('SIGKILL'), DEADLINE_MS)
    child.on('exit', (code) => {
      clearTimeout(timer)
      resolve({ code, out })
    })
  })
  assert.equal(result.code, 0)
  assert.match(result.out, /closed/)
})
