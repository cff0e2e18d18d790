'use strict'

// The shared protocol vectors (tests/vectors/protocol.json) through the Node
// front: the keys the client writes, the resources it refuses, the limits.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const fs = require('node:fs')
const path = require('node:path')
const { Client, InvalidArgumentError, MIN_TTL_MS, MAX_TTL_MS, MAX_RESOURCE_LEN } = require('..')
const { RedisNodes, ROOT } = require('./helpers.js')

const VECTORS = JSON.parse(fs.readFileSync(path.join(ROOT, 'tests', 'vectors', 'protocol.json'), 'utf8'))

let nodes
before(async () => {
  nodes = await RedisNodes.start(1)
})
after(async () => {
  await nodes.stop()
})

test('limits match the protocol', () => {
  assert.equal(MIN_TTL_MS, VECTORS.ttl_ms.min)
  assert.equal(MAX_TTL_MS, VECTORS.ttl_ms.max)
  assert.equal(MAX_RESOURCE_LEN, VECTORS.limits.max_resource_bytes)
})

for (const vector of VECTORS.keys) {
  test(`key vector ${JSON.stringify(vector.prefix)} + ${JSON.stringify(vector.resource)} is the key the client writes`, async () => {
    const client = new Client({ nodes: nodes.urls, keyPrefix: vector.prefix })
    try {
      const lock = await client.acquire(vector.resource, { ttl: 5000, wait: 2000 })
      const owner = await nodes.call(0, 'GET', vector.lock_key)
      assert.equal(owner.length, VECTORS.token.hex_digits)
      assert.ok(
        [...owner].every((c) => VECTORS.token.alphabet.includes(c)),
        owner,
      )
      assert.equal(await nodes.call(0, 'GET', vector.fence_key), String(lock.fencingToken))
      await lock.release()
    } finally {
      await client.close()
    }
  })
}

test('invalid resource vectors are refused before anything is sent', async () => {
  const client = new Client({ nodes: nodes.urls })
  try {
    for (const v of VECTORS.invalid_resources) {
      const resource = 'resource' in v ? v.resource : v.resource_repeat.repeat(v.times)
      const error = await client.tryAcquire(resource).catch((e) => e)
      assert.ok(error instanceof RangeError || error instanceof InvalidArgumentError, `${v.why}: ${error}`)
    }
  } finally {
    await client.close()
  }
})
