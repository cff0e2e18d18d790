'use strict'

// Builds the native addon from source with the napi-rs CLI:
//   node build.js [--debug]
// It is the package's "prepare" script, so `npm install` inside this folder
// builds the addon, and so does `npm install /path/to/bindings/node` from
// another project. In that second case npm links this folder without
// installing its devDependencies, so the CLI is installed here first.

const { spawnSync } = require('node:child_process')
const fs = require('node:fs')
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

// The addon napi-rs wrote last: fencelock.<platform>.node, here.
function builtAddon() {
  const { binaryName } = require('./package.json').napi
  const built = fs
    .readdirSync(__dirname)
    .filter((name) => name.startsWith(`${binaryName}.`) && name.endsWith('.node'))
    .map((name) => path.join(__dirname, name))
    .sort((a, b) => fs.statSync(b).mtimeMs - fs.statSync(a).mtimeMs)
  if (built.length === 0) throw new Error(`fencelock: the build wrote no ${binaryName}.*.node`)
  return built[0]
}

// Strips the release addon of its symbols and debug information (tens of MB)
// with the system's strip, rather than napi's --strip: that sets RUSTFLAGS,
// which changes every crate's fingerprint. So scripts/package/node.sh, which
// runs this file with the packages' toolchain (scripts/package/toolchain.sh),
// reuses the crates of the other packages' release builds. Windows' linker
// keeps debug information out of the DLL already.
function strip(addon) {
  if (process.platform === 'win32') return
  const args = process.platform === 'darwin' ? ['-x', addon] : [addon]
  const result = spawnSync('strip', args, { stdio: 'inherit' })
  if (result.error || result.status !== 0) {
    console.log(
      `fencelock: could not strip ${path.basename(addon)} (is strip installed?); it works unstripped, only larger`,
    )
  }
}

const release = !process.argv.includes('--debug')
const args = ['build', '--platform', '--js', 'native.js', '--dts', 'native.d.ts', '--no-const-enum']
if (release) args.push('--release')
run(process.execPath, [cli, ...args])
if (release) strip(builtAddon())
