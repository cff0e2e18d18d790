'use strict'

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { Client, UnavailableError } = require('..')
const { RedisNodes, unique } = require('./helpers.js')

test('Redlock over 3 nodes: works with one killed, UnavailableError with two, tokens keep increasing', async () => {
  const nodes = await RedisNodes.start(3)
  const client = new Client({ nodes: nodes.urls, nodeTimeoutMs: 200 })
  try {
    const resource = unique('redlock')
    const first = await client.acquire(resource)
    for (let i = 0; i < 3; i++) {
      assert.equal(await nodes.call(i, 'EXISTS', `fencelock:{${resource}}`), '1')
    }
    await first.release()

    await nodes.kill(0)
    const second = await client.acquire(resource, { wait: 2000 })
    assert.ok(second.fencingToken > first.fencingToken)
    assert.equal(second.isHeld(), true)
    await second.release()

    await nodes.kill(1)
    const error = await client.acquire(resource, { wait: 0 }).catch((e) => e)
    assert.ok(error instanceof UnavailableError, String(error))
    assert.equal(error.code, 'UNAVAILABLE')
    assert.equal(error.nodes.length, 3)
    assert.deepEqual(
      error.nodes.map((n) => n.node),
      nodes.urls,
    )
    const outcomes = error.nodes.map((n) => n.outcome)
    assert.equal(outcomes.filter((o) => o === 'ok').length <= 1, true, outcomes.join(','))
    assert.ok(
      outcomes.some((o) => o === 'failed' || o === 'timed_out'),
      outcomes.join(','),
    )
  } finally {
    await client.close()
    await nodes.stop()
  }
})
