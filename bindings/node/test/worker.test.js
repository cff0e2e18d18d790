'use strict'

// The addon in worker threads: each worker gets its own bridge to the
// runtime; terminating a worker with a pending acquire and a watched lock
// takes down neither the addon nor the process.

const { test, before, after } = require('node:test')
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const { RedisNodes, PACKAGE } = require('./helpers.js')

let nodes
before(async () => {
  nodes = await RedisNodes.start(1)
})
after(async () => {
  await nodes.stop()
})

test('workers use the addon, and terminating one mid-operation is safe', async () => {
  const script = `
    const { Worker } = require('node:worker_threads')
    const { Client } = require(${JSON.stringify(PACKAGE)})
    const nodes = ${JSON.stringify(nodes.urls)}
    const workerCode = \`
      const { parentPort, workerData } = require('node:worker_threads')
      const { Client } = require(workerData.pkg)
      const client = new Client({ nodes: workerData.nodes })
      ;(async () => {
        const lock = await client.acquire('worker:' + workerData.id, { ttl: 1000 })
        lock.signal.addEventListener('abort', () => {})
        globalThis.keep = lock
        // Never resolves before the worker is terminated.
        client.acquire('worker:' + workerData.id, { wait: 60000 }).catch(() => {})
        parentPort.postMessage(String(lock.fencingToken))
      })()
    \`
    ;(async () => {
      const tokens = []
      for (let id = 0; id < 3; id++) {
        const worker = new Worker(workerCode, { eval: true, workerData: { pkg: ${JSON.stringify(PACKAGE)}, nodes, id } })
        tokens.push(await new Promise((resolve, reject) => { worker.once('message', resolve); worker.once('error', reject) }))
        await worker.terminate()
      }
      const client = new Client({ nodes })
      const lock = await client.acquire('worker:main')
      await lock.release()
      await client.close()
      console.log('tokens ' + tokens.join(','))
    })().catch((e) => { console.error(e); process.exitCode = 2 })
  `
  const result = await new Promise((resolve, reject) => {
    const child = spawn(process.execPath, ['-e', script], { stdio: ['ignore', 'pipe', 'inherit'] })
    let out = ''
    child.stdout.on('data', (d) => (out += d))
    const timer = setTimeout(() => child.kill('SIGKILL'), 30000)
    child.on('error', reject)
    child.on('exit', (code, signal) => {
      clearTimeout(timer)
      resolve({ code, signal, out })
    })
  })
  assert.deepEqual([result.code, result.signal], [0, null], result.out)
  assert.match(result.out, /tokens 1,1,1/)
})
