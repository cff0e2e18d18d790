'use strict'

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { Client, UnavailableError } = require('fencelock')
const { RedisNodes, unique } = require('./helpers.js')

test('Redlock over 3 nodes: works with one killed, UnavailableError with two, tokens keep increasing', async () => {
  const nodes = await RedisNodes.start(3)
  const client = new Client({ nodes: nodes.urls, nodeTimeoutMs: 200 })
  try {
    const resource = unique('redlock')
    const first = await client.acquire(resource)
    // Redlock promises the key on a majority: acquire returns once 2 of 3
    // granted, and the third grant may land later, or never (a request not
    // yet sent when the quorum decided is dropped).
    let holding = 0
    for (let i = 0; i < 3; i++) {
      if ((await nodes.call(i, 'EXISTS', `fencelock:{${resource}}`)) === '1') holding += 1
    }
    assert.ok(holding >= 2, `the key is on ${holding} of 3 nodes`)
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
