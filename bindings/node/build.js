'use strict'

// Builds the native addon from source with the napi-rs CLI:
//   node build.js [--debug]
// It is the package's "prepare" script, so `npm install` inside this folder
// builds the addon, and so does `npm install /path/to/bindings/node` from
// another project. In that second case npm links this folder without
// installing its devDependencies, so the CLI is installed here first.

const { spawnSync } = require('node:child_process')
const path = require('node:path')

function run(command, args) {
  const result = spawnSync(command, args, { cwd: __dirname, stdio: 'inherit' })
  if (result.error) throw result.error
  if (result.status !== 0) process.exit(result.status ?? 1)
}

function napiCli() {
  try {
    const manifest = require.resolve('@napi-rs/cli/package.json', { paths: [__dirname] })
    return path.join(path.dirname(manifest), require(manifest).bin.napi)
  } catch {
    return null
  }
}

let cli = napiCli()
if (cli === null) {
  console.log('fencelock: installing the napi-rs CLI to build the addon…')
  const npm = process.platform === 'win32' ? 'npm.cmd' : 'npm'
  run(npm, ['install', '--no-save', '--ignore-scripts', '--no-audit', '--no-fund'])
  cli = napiCli()
  if (cli === null) throw new Error('fencelock: @napi-rs/cli is still missing after npm install')
}

const release = !process.argv.includes('--debug')
const args = ['build', '--platform', '--js', 'native.js', '--dts', 'native.d.ts', '--no-const-enum']
if (release) args.push('--release', '--strip')
run(process.execPath, [cli, ...args])
