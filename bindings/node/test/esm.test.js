'use strict'

// The package works as an ES module too: same classes as the CommonJS entry,
// resolved through package.json "exports".

const { test } = require('node:test')
const assert = require('node:assert/strict')
const { execFileSync } = require('node:child_process')
const cjs = require('fencelock')

test('ESM entry exports the same objects as the CommonJS one', async () => {
  const esm = await import('fencelock')
  for (const name of Object.keys(cjs)) assert.equal(esm[name], cjs[name], name)
  assert.equal(esm.default, cjs)
  const out = execFileSync(
    process.execPath,
    [
      '--input-type=module',
      '-e',
      "import { Client, NotAcquiredError } from 'fencelock'; console.log(typeof Client, NotAcquiredError.code)",
    ],
    { cwd: __dirname, encoding: 'utf8' },
  )
  assert.equal(out.trim(), 'function NOT_ACQUIRED')
})
