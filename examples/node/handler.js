'use strict'

// An HTTP handler (node:http, no framework) that takes a per-SKU lock for
// each order: a concurrent order for the same SKU gets 409 Conflict instead
// of queueing, and the stock is written with the lock's fencing token, so a
// holder that stalled past its lease cannot overwrite newer stock.

const http = require('node:http')
const { StaleTokenError } = require('fencelock')

/** `POST /orders/:sku` buys one; `GET /stock/:sku` reads the stock. */
function createServer(client, { slowWriteMs = 0 } = {}) {
  return http.createServer(async (req, res) => {
    const reply = (status, body) => {
      res.writeHead(status, { 'content-type': 'application/json' })
      res.end(JSON.stringify(body))
    }
    try {
      const [, kind, sku] = req.url.split('/')
      if (req.method === 'GET' && kind === 'stock') {
        const stored = await client.fencedGet(`stock:${sku}`)
        return reply(200, { sku, stock: stored ? Number(stored.value) : null })
      }
      if (req.method !== 'POST' || kind !== 'orders' || !sku) return reply(404, { error: 'not found' })
      const lock = await client.tryAcquire(`inventory:${sku}`, { ttl: 5000 })
      if (lock === null) return reply(409, { error: `an order for ${sku} is in progress; retry` })
      try {
        const stored = await client.fencedGet(`stock:${sku}`)
        const stock = stored ? Number(stored.value) : 0
        if (stock <= 0) return reply(410, { error: `${sku} is sold out` })
        if (slowWriteMs > 0) await new Promise((r) => setTimeout(r, slowWriteMs))
        lock.signal.throwIfAborted() // lost meanwhile: do not write
        await client.fencedSet(`stock:${sku}`, String(stock - 1), lock.fence)
        return reply(200, { sku, stock: stock - 1, fencingToken: String(lock.fencingToken) })
      } finally {
        await lock[Symbol.asyncDispose]()
      }
    } catch (error) {
      const status = error instanceof StaleTokenError ? 409 : 503
      return reply(status, { error: error.message, code: error.code })
    }
  })
}

module.exports = { createServer }
