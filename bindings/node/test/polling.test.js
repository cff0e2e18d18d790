'use strict'

// While results come in fast, the event loop polls (a `setImmediate(poll)`
// chain) instead of sleeping between them; it stops as soon as nothing is
// pending, and `FENCELOCK_POLL_MS=0` turns it off. Each case runs in a child
// process that counts the chain's `setImmediate` calls (Node's own immediates,
// such as the ones that run finalizers, are not counted).

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { execFile } = require('node:child_process')
const { RedisNodes, PACKAGE } = require('./helpers.js')

let nodes
before(async () => {
  nodes = await RedisNodes.start(1)
})
after(async () => {
  await nodes.stop()
})

/**
 * Runs 32 acquire+release loops (for `ms`, or until polling is seen when
 * `untilSeen`) in a child with `env`; the child prints what it observed.
 */
function observe(env, { ms = 3000, untilSeen = false } = {}) {
  const script = `
    let polls = 0
    const original = globalThis.setImmediate
    globalThis.setImmediate = (fn, ...args) => {
      if (fn.name === 'poll') polls++
      return original(fn, ...args)
    }
    const fencelock = require(${JSON.stringify(PACKAGE)})
    ;(async () => {
      const client = new fencelock.Client({ nodes: ${JSON.stringify(nodes.urls)} })
      let stop = false, cycles = 0
      const started = Date.now()
      const loops = Array.from({ length: 32 }, async (_, i) => {
        while (!stop) {
          const lock = await client.acquire('poll:' + i, { ttl: 5000, wait: 0 })
          await lock.release()
          cycles++
          if (Date.now() - started > ${ms} || (${untilSeen} && polls > 0)) stop = true
        }
      })
      await Promise.all(loops)
      const whenDone = polls
      // Nothing is pending now: the chain ends at its next turn.
      await new Promise((resolve) => setTimeout(resolve, 20))
      await client.close()
      console.log(JSON.stringify({ polls: whenDone, after: polls - whenDone, cycles }))
    })().catch((e) => { console.error(e); process.exitCode = 3 })
  `
  return new Promise((resolve, reject) => {
    execFile(process.execPath, ['-e', script], { env: { ...process.env, ...env } }, (error, stdout, stderr) => {
      if (error) reject(new Error(`child failed: ${error.message}\n${stderr}`))
      else resolve(JSON.parse(stdout))
    })
  })
}

test('the loop polls while results come in fast, and stops once nothing is pending', async () => {
  const seen = await observe({ FENCELOCK_POLL_MS: '' }, { untilSeen: true })
  assert.ok(seen.cycles > 0)
  assert.ok(seen.polls > 0, `never polled in ${seen.cycles} cycles`)
  assert.equal(seen.after, 0, 'still polling after the last result')
})

test('FENCELOCK_POLL_MS=0 turns polling off', async () => {
  const off = await observe({ FENCELOCK_POLL_MS: '0' }, { ms: 1000 })
  assert.ok(off.cycles > 0)
  assert.equal(off.polls + off.after, 0, `polled in ${off.cycles} cycles although turned off`)
})

test('a bad FENCELOCK_POLL_MS fails loading with a RangeError that names it', async () => {
  for (const bad of ['abc', '-1', '11', 'NaN']) {
    await assert.rejects(
      observe({ FENCELOCK_POLL_MS: bad }, { ms: 10 }),
      (err) => /RangeError: FENCELOCK_POLL_MS must be a number of ms from 0 to 10/.test(err.message),
      `FENCELOCK_POLL_MS=${bad}`,
    )
  }
})
