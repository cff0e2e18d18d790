'use strict'

// An acquire whose replies arrive after the ttl must fail: it may never hand
// out a lock that has already expired on Redis. A small TCP proxy in front of
// the node delays every reply.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const net = require('node:net')
const { Client, FenceLockError } = require('fencelock')
const { RedisNodes, unique, eventually } = require('./helpers.js')

/** A proxy to `url` that delays server-to-client bytes by `proxy.delayMs`. */
async function delayingProxy(url) {
  const { hostname, port } = new URL(url)
  const sockets = new Set()
  const proxy = { delayMs: 0 }
  const server = net.createServer((downstream) => {
    const upstream = net.connect(Number(port), hostname)
    sockets.add(downstream).add(upstream)
    downstream.on('data', (chunk) => upstream.write(chunk))
    upstream.on('data', (chunk) => {
      const send = () => downstream.destroyed || downstream.write(chunk)
      if (proxy.delayMs === 0) send()
      else setTimeout(send, proxy.delayMs)
    })
    const close = () => {
      downstream.destroy()
      upstream.destroy()
    }
    downstream.on('error', close).on('close', close)
    upstream.on('error', close).on('close', close)
  })
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  proxy.url = `redis://127.0.0.1:${server.address().port}`
  proxy.close = () => {
    for (const socket of sockets) socket.destroy()
    return new Promise((resolve) => server.close(resolve))
  }
  return proxy
}

test('replies arriving after the ttl never yield an already-expired lock', async () => {
  const nodes = await RedisNodes.start(1)
  const proxy = await delayingProxy(nodes.urls[0])
  const client = new Client({ nodes: [proxy.url], nodeTimeoutMs: 5000 })
  try {
    const resource = unique('late')
    // Connected and scripts loaded while the proxy is fast.
    await (await client.acquire(unique('warm'))).release()
    proxy.delayMs = 300
    const outcome = await client.acquire(resource, { ttl: 100, wait: 0 }).then(
      (lock) => ({ lock }),
      (error) => ({ error }),
    )
    assert.equal(outcome.lock, undefined, 'an expired lock was handed out')
    assert.ok(outcome.error instanceof FenceLockError, String(outcome.error))
    proxy.delayMs = 0
    await eventually(async () => (await nodes.call(0, 'EXISTS', `fencelock:{${resource}}`)) === '0')
  } finally {
    await client.close()
    await proxy.close()
    await nodes.stop()
  }
})
