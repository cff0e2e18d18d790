'use strict'

// `await using` in TypeScript: compiles test/ts/dispose.ts with tsc (which
// also type-checks it against index.d.ts) and runs the output on this Node.

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { execFileSync } = require('node:child_process')
const path = require('node:path')
const { RedisNodes, unique } = require('./helpers.js')
const TS = path.join(__dirname, 'ts')

test('TypeScript `await using` releases the lock (and resigns a leadership, releases a permit, a reader and a writer) at block exit', async () => {
  const tsc = require.resolve('typescript/bin/tsc')
  execFileSync(process.execPath, [tsc, '-p', path.join(TS, 'tsconfig.json')], { stdio: 'inherit' })
  const nodes = await RedisNodes.start(1)
  try {
    const resource = unique('ts')
    const output = execFileSync(
      process.execPath,
      [path.join(TS, 'out', 'dispose.js'), JSON.stringify(nodes.urls), resource],
      {
        encoding: 'utf8',
      },
    )
    const result = JSON.parse(output.trim().split('\n').pop())
    assert.equal(result.held, true)
    assert.equal(result.busy, true, 'another tryAcquire saw the lock held inside the block')
    assert.equal(result.reacquired, true, 'the lock was free after the block')
    assert.ok(BigInt(result.usingToken) > BigInt(result.token))
    assert.equal(result.error, null)
    // `await using` a leadership, and `for await` over observe().
    assert.equal(result.election.seen, `host-a:1@${result.election.epoch}`)
    assert.equal(result.election.free, true, 'the election was free after the block')
    // `await using` a semaphore's permit.
    assert.deepEqual(result.semaphore, { permit: 0, busy: true, free: 0 })
    // `await using` a read-write lock's readers and writer.
    assert.deepEqual(result.rwLock, { shared: true, excluded: true, writerAfter: true, free: true })
    assert.equal(await nodes.call(0, 'EXISTS', `fencelock:{${resource}}`), '0')
  } finally {
    await nodes.stop()
  }
})
