'use strict'

// Runs both examples against real Redis and checks what they promise:
//   node demo.js                       (starts its own redis-server nodes through
//                                       the repository's redis-nodes harness)
//   FENCELOCK_NODES=redis://127.0.0.1:6379 node demo.js   (uses yours)
// Exits non-zero if an expectation fails.

const assert = require('node:assert/strict')
const { Client } = require('fencelock')
const { createServer } = require('./handler.js')
const { runOnce } = require('./run-once.js')

async function startNodes() {
  if (process.env.FENCELOCK_NODES) return { urls: process.env.FENCELOCK_NODES.split(','), stop: async () => {} }
  const { RedisNodes } = require('../../bindings/node/test/helpers.js')
  return RedisNodes.start(1)
}

async function main() {
  const nodes = await startNodes()
  const client = new Client({ nodes: nodes.urls })
  try {
    // 1. HTTP: two simultaneous orders for one SKU → one 200, one 409.
    const sku = `sku-${process.pid}`
    const stock = await client.acquire(`inventory:${sku}`)
    await client.fencedSet(`stock:${sku}`, '3', stock.fence)
    await stock.release()
    const server = createServer(client, { slowWriteMs: 200 })
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
    const base = `http://127.0.0.1:${server.address().port}`
    const order = () => fetch(`${base}/orders/${sku}`, { method: 'POST' }).then(async (r) => [r.status, await r.json()])
    const [a, b] = await Promise.all([order(), order()])
    const statuses = [a[0], b[0]].sort()
    console.log(`two concurrent orders for ${sku}: HTTP ${statuses.join(' and ')}`)
    assert.deepEqual(statuses, [200, 409])
    const [, after] = await fetch(`${base}/stock/${sku}`).then(async (r) => [r.status, await r.json()])
    console.log(`stock after: ${after.stock} (was 3)`)
    assert.equal(after.stock, 2)
    await new Promise((resolve) => server.close(resolve))

    // 2. Run once across three instances (three clients, as three processes would have).
    const instances = [client, new Client({ nodes: nodes.urls }), new Client({ nodes: nodes.urls })]
    let runs = 0
    const job = async (signal) => {
      runs += 1
      await new Promise((r) => setTimeout(r, 100))
      signal.throwIfAborted()
    }
    const ran = await Promise.all(instances.map((c) => runOnce(c, `report-${process.pid}`, job)))
    console.log(`nightly report: ran on ${ran.filter(Boolean).length} of 3 instances`)
    assert.equal(runs, 1)
    await Promise.all(instances.slice(1).map((c) => c.close()))
    console.log('ok')
  } finally {
    await client.close()
    await nodes.stop()
  }
}

main().catch((error) => {
  console.error(error)
  process.exitCode = 1
})
