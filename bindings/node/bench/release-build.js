'use strict'

// The benchmarks' guard against measuring a debug build of the addon.
// scripts/test-node.sh leaves one in bindings/node (a cargo build that reuses
// the crates `cargo test` compiled); its timings say nothing about a release
// build. Addons from before the profile was recorded pass.

const path = require('node:path')

/** Exits with the command that builds a release addon when the addon is a debug build. */
function requireReleaseBuild() {
  const profile = require('../native.js').BUILD_PROFILE ?? 'release'
  if (profile !== 'release') {
    const folder = path.resolve(__dirname, '..')
    console.error(
      `the fencelock addon in ${folder} is a ${profile} build; benchmarks need a release build: (cd ${folder} && npm run build)`,
    )
    process.exit(1)
  }
}

module.exports = { requireReleaseBuild }
