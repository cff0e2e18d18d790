'use strict'

// PostgreSQL as a node (docs/postgres-store.md): the same locks, tokens,
// waits, fenced writes and lost signal over a real PostgreSQL server from
// `redis-nodes --postgres`. Each test is skipped, saying why, when that
// server cannot start (PostgreSQL not installed).

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const util = require('node:util')
const { Client, ConfigError, LockLostError, NotAcquiredError, StaleTokenError } = require('fencelock')
const { RedisNodes, unique } = require('./helpers.js')

let pg
let url
let unavailable

before(async () => {
  try {
    pg = await RedisNodes.start(1, { postgres: true })
    url = pg.urls[0]
  } catch (error) {
    // Skipped only without PostgreSQL; a harness that fails otherwise fails the tests.
    if (!error.postgresMissing) throw error
    unavailable = `no PostgreSQL server: ${error.message}`
  }
})

after(async () => {
  if (pg) await pg.stop()
})

/** Skips `t` (saying why) when there is no server; true then. */
function skipped(t) {
  if (unavailable === undefined) return false
  t.skip(unavailable)
  return true
}

const quoted = (text) => `'${text.replaceAll("'", "''")}'`
const leaseRow = (resource) => `FROM fencelock.keys WHERE key = ${quoted(`fencelock:{${resource}}`)}`

/** Resolves with the signal's reason once it aborts. */
function aborted(signal) {
  if (signal.aborted) return Promise.resolve(signal.reason)
  return new Promise((resolve) => signal.addEventListener('abort', () => resolve(signal.reason), { once: true }))
}

test('PostgreSQL: acquire, a second client is refused while held, extend, release, a larger token next', async (t) => {
  if (skipped(t)) return
  const holder = new Client({ nodes: url, nodeTimeoutMs: 5000 })
  const other = new Client({ nodes: [url], nodeTimeoutMs: 5000 })
  try {
    const resource = unique('pg-life')
    const lock = await holder.acquire(resource, { ttl: 5000 })
    assert.equal(lock.isHeld(), true)
    assert.equal(await pg.sql(`SELECT count(*) ${leaseRow(resource)}`), '1')
    assert.equal(await other.tryAcquire(resource, { ttl: 5000 }), null)
    const refused = await other.acquire(resource, { ttl: 5000, wait: 0 }).catch((e) => e)
    assert.ok(refused instanceof NotAcquiredError, String(refused))
    assert.deepEqual(
      refused.nodes.map((n) => n.outcome),
      ['held_by_other'],
    )
    await lock.extend(8000)
    const ms = Number(
      await pg.sql(`SELECT (extract(epoch FROM expires_at - clock_timestamp()) * 1000)::int ${leaseRow(resource)}`),
    )
    assert.ok(ms > 5000 && ms <= 8000, `the lease row's expiry follows extend: ${ms} ms`)
    assert.ok(lock.remainingMs > 5000 && lock.remainingMs <= 8000, `remainingMs ${lock.remainingMs}`)
    await lock.release()
    assert.equal(lock.status, 'released')
    assert.equal(await pg.sql(`SELECT count(*) ${leaseRow(resource)}`), '0')
    const again = await other.acquire(resource, { ttl: 5000, wait: 0 })
    assert.ok(again.fencingToken > lock.fencingToken, `${again.fencingToken} > ${lock.fencingToken}`)
    await again.release()
  } finally {
    await holder.close()
    await other.close()
  }
})

test('PostgreSQL: a waiter blocked while the lock is held is served after the release, with a larger token', async (t) => {
  if (skipped(t)) return
  const holder = new Client({ nodes: url, nodeTimeoutMs: 5000 })
  const waiter = new Client({ nodes: url, nodeTimeoutMs: 5000 })
  try {
    const resource = unique('pg-wait')
    const lock = await holder.acquire(resource, { ttl: 10000 })
    let served = null
    const waiting = waiter.acquire(resource, { ttl: 5000, wait: 8000 }).then((next) => (served = next))
    await new Promise((r) => setTimeout(r, 500))
    assert.equal(served, null, 'the waiter waits while the lock is held')
    await lock.release()
    const next = await waiting
    assert.ok(next.fencingToken > lock.fencingToken, `${next.fencingToken} > ${lock.fencingToken}`)
    await next.release()
  } finally {
    await holder.close()
    await waiter.close()
  }
})

test('PostgreSQL: fencedSet with the current token works, an older one is refused with StaleTokenError', async (t) => {
  if (skipped(t)) return
  const client = new Client({ nodes: url })
  try {
    const resource = unique('pg-fenced')
    const key = unique('pg-data')
    const older = await client.acquire(resource, { ttl: 5000 })
    await older.release()
    const newer = await client.acquire(resource, { ttl: 5000 })
    await client.fencedSet(key, 'new', newer.fence)
    const stale = await client.fencedSet(key, 'old', older.fence).catch((e) => e)
    assert.ok(stale instanceof StaleTokenError, String(stale))
    assert.equal(stale.code, 'STALE_TOKEN')
    assert.deepEqual(await client.fencedGet(key), { value: 'new', fencingToken: newer.fencingToken })
    await client.fencedSet(key, 'newer', newer.fence)
    assert.deepEqual(await client.fencedGet(key), { value: 'newer', fencingToken: newer.fencingToken })
    assert.equal(await client.fencedGet(unique('pg-absent')), null)
    await newer.release()
  } finally {
    await client.close()
  }
})

test("PostgreSQL: the lease row deleted behind the holder's back aborts lock.signal with reason 'deleted'", async (t) => {
  if (skipped(t)) return
  const client = new Client({ nodes: url })
  try {
    const resource = unique('pg-lost')
    const lock = await client.acquire(resource, { ttl: 600 })
    const { signal } = lock
    assert.equal(signal.aborted, false)
    assert.equal(
      await pg.sql(`DELETE ${leaseRow(resource)} RETURNING key`),
      `fencelock:{${resource}}`,
      'the lease row was there',
    )
    const reason = await Promise.race([
      aborted(signal),
      new Promise((_, reject) =>
        setTimeout(() => reject(new Error('the loss was not signalled in 5 s')), 5000).unref(),
      ),
    ])
    assert.ok(reason instanceof LockLostError, String(reason))
    assert.equal(reason.reason, 'deleted')
    assert.equal(reason.resource, resource)
    assert.equal(lock.isHeld(), false)
    assert.equal(lock.status, 'lost:deleted')
    await assert.rejects(lock.extend(1000), LockLostError)
  } finally {
    await client.close()
  }
})

test('PostgreSQL beside Redis is a ConfigError; the password never shows in errors or inspect', async (t) => {
  if (skipped(t)) return
  const password = new URL(url).password
  assert.ok(password, url)
  for (const nodes of [
    [url, 'redis://127.0.0.1:1'],
    ['redis://127.0.0.1:1', url],
  ]) {
    let error
    try {
      const client = new Client({ nodes })
      // Should the check ever move to the first operation, it must still refuse.
      error = await client.acquire(unique('pg-mixed'), { wait: 0 }).catch((e) => e)
      await client.close()
    } catch (e) {
      error = e
    }
    assert.ok(error instanceof ConfigError, util.inspect(error))
    assert.equal(error.code, 'CONFIG')
    assert.match(error.message, /PostgreSQL/)
    for (const shown of [error.message, error.stack, util.inspect(error), JSON.stringify(error)]) {
      assert.ok(!shown.includes(password), shown)
    }
  }
  // A working client does not show it either.
  const client = new Client({ nodes: url, nodeTimeoutMs: 5000 })
  try {
    const resource = unique('pg-secret')
    const lock = await client.acquire(resource, { ttl: 5000 })
    const refused = await client.acquire(resource, { wait: 0 }).catch((e) => e)
    assert.ok(refused instanceof NotAcquiredError, String(refused))
    const states = await client.inspect(resource)
    for (const shown of [
      util.inspect(client, { showHidden: true, depth: 5 }),
      String(client),
      util.inspect(lock, { depth: 5 }),
      util.inspect(refused, { depth: 5 }),
      JSON.stringify(refused.nodes),
      util.inspect(states, { depth: 5 }),
    ]) {
      assert.ok(!shown.includes(password), shown)
    }
    await lock.release()
  } finally {
    await client.close()
  }
})
