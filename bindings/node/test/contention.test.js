'use strict'

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { spawn } = require('node:child_process')
const path = require('node:path')
const { RedisNodes, unique } = require('./helpers.js')

const WORKER = path.join(__dirname, 'fixtures', 'counter-worker.js')

function run(args) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [WORKER, ...args], { stdio: ['ignore', 'inherit', 'inherit'] })
    child.on('error', reject)
    child.on('exit', (code, signal) => resolve({ code, signal }))
  })
}

for (const count of [1, 5]) {
  test(`two Node processes, ${count} node(s): the shared counter is exact`, async () => {
    const nodes = await RedisNodes.start(count)
    try {
      const resource = unique(`procs${count}`)
      const rounds = 100
      const args = [JSON.stringify(nodes.urls), resource, nodes.urls[0], String(rounds)]
      const results = await Promise.all([run(args), run(args)])
      assert.deepEqual(results, [
        { code: 0, signal: null },
        { code: 0, signal: null },
      ])
      assert.equal(await nodes.call(0, 'GET', `counter:${resource}`), String(2 * rounds))
    } finally {
      await nodes.stop()
    }
  })
}
