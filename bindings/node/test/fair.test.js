'use strict'

// Fair (FIFO) waiting from Node (docs/protocol.md §4.9): `fair: true`
// reaches the core; waiters are served in arrival order.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { Client } = require('fencelock')
const { RedisNodes, unique, eventually } = require('./helpers.js')

const queueKey = (resource) => `fencelock:{${resource}}:queue`

test('a fair tryAcquire does not pass a live waiter; a default one takes the free lock', async () => {
  const nodes = await RedisNodes.start(1)
  const client = new Client({ nodes: nodes.urls })
  try {
    const resource = unique('fair-newcomer')
    // A waiter with a long lease first in line, as a live waiter between
    // two of its attempts looks.
    const waiter = 'eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee:1'
    await nodes.call(0, 'ZADD', queueKey(resource), '1', waiter)
    await nodes.call(0, 'ZADD', `fencelock:{${resource}}:leases`, '99999999999999', waiter)
    assert.equal(await client.tryAcquire(resource, { ttl: 5000, fair: true }), null)
    await assert.rejects(client.acquire(resource, { ttl: 5000, wait: 0, fair: true }), { name: 'NotAcquiredError' })
    const lock = await client.tryAcquire(resource, { ttl: 5000, fair: false })
    assert.notEqual(lock, null)
    await lock.release()
  } finally {
    await client.close()
    await nodes.stop()
  }
})

test('fair waiters on three nodes are served in arrival order', async () => {
  const nodes = await RedisNodes.start(3)
  const clients = Array.from({ length: 6 }, () => new Client({ nodes: nodes.urls }))
  try {
    const resource = unique('fair-order')
    const holder = await clients[0].acquire(resource, { ttl: 10000, wait: 0 })
    const order = []
    const waits = []
    for (let i = 1; i < clients.length; i++) {
      waits.push(
        clients[i].acquire(resource, { ttl: 10000, wait: 20000, fair: true }).then(async (lock) => {
          order.push(i)
          await lock.release()
        }),
      )
      // Each waiter is in line before the next one asks.
      await eventually(async () => Number(await nodes.call(0, 'ZCARD', queueKey(resource))) === i)
    }
    await holder.release()
    await Promise.all(waits)
    assert.deepEqual(order, [1, 2, 3, 4, 5])
  } finally {
    await Promise.all(clients.map((client) => client.close()))
    await nodes.stop()
  }
})
