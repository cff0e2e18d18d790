'use strict'

// Real redis-server nodes for the tests, through the shared harness program
// `redis-nodes` (tests/harness): it picks free loopback ports, starts the
// servers, kills them by PID on `kill I`, and stops them all when its stdin
// closes (or when it dies). `{ postgres: true }` starts one PostgreSQL
// server instead (`redis-nodes --postgres`), which takes `sql STATEMENT`.

const { spawn } = require('node:child_process')
const path = require('node:path')
const fs = require('node:fs')
const readline = require('node:readline')

const ROOT = path.resolve(__dirname, '..', '..', '..')

// The package under test, reached by its name as a user's code reaches it:
// in the repository that is bindings/node itself (a package may require its
// own name through "exports"); in scripts/package/node.sh, which copies these
// tests into a project that installed the packed tarballs, it is that
// project's node_modules/fencelock.
const PACKAGE = path.dirname(require.resolve('fencelock/package.json'))

function harnessPath() {
  if (process.env.FENCELOCK_REDIS_NODES) return process.env.FENCELOCK_REDIS_NODES
  const targetDir = process.env.CARGO_TARGET_DIR ?? path.join(ROOT, 'target')
  const bin = path.join(targetDir, 'debug', 'redis-nodes')
  if (!fs.existsSync(bin)) {
    throw new Error(`${bin} is missing; build it with: cargo build -p fencelock-harness --bin redis-nodes`)
  }
  return bin
}

/** A set of redis-server nodes; `await nodes.stop()` when done. */
class RedisNodes {
  constructor(child, urls, lines) {
    this.child = child
    this.urls = urls
    this.lines = lines
    this.queue = Promise.resolve()
  }

  /**
   * Starts `count` nodes (`aof` keeps their data across restarts), or with
   * `postgres` one PostgreSQL server; if that cannot start (PostgreSQL not
   * installed), rejects with what redis-nodes said on stderr.
   */
  static async start(count = 1, { aof = false, postgres = false } = {}) {
    const args = postgres ? ['--postgres'] : ['--nodes', String(count)]
    if (aof) args.push('--aof')
    const child = spawn(harnessPath(), args, { stdio: ['pipe', 'pipe', postgres ? 'pipe' : 'inherit'] })
    let said = ''
    const stderrEnded = postgres ? new Promise((resolve) => child.stderr.on('end', resolve)) : null
    if (postgres) child.stderr.on('data', (chunk) => (said += chunk))
    const rl = readline.createInterface({ input: child.stdout })
    const waiting = []
    const buffered = []
    rl.on('line', (line) => {
      const next = waiting.shift()
      if (next) next(line)
      else buffered.push(line)
    })
    const nextLine = () =>
      new Promise((resolve, reject) => {
        if (buffered.length > 0) return resolve(buffered.shift())
        const onExit = (code) => reject(new Error(`redis-nodes exited (${code})`))
        // Removed once the line came: a test making many calls adds no listeners.
        child.once('exit', onExit)
        waiting.push((line) => {
          child.removeListener('exit', onExit)
          resolve(line)
        })
      })
    let first
    try {
      first = await nextLine()
    } catch (error) {
      if (!postgres) throw error
      await stderrEnded
      const failure = new Error(`redis-nodes ${args.join(' ')} did not start: ${error.message}: ${said.trim()}`)
      // 77: PostgreSQL is not installed, the one reason its tests skip.
      failure.postgresMissing = child.exitCode === 77
      throw failure
    }
    if (postgres) {
      child.stderr.removeAllListeners('data')
      child.stderr.pipe(process.stderr, { end: false })
    }
    const { nodes } = JSON.parse(first)
    return new RedisNodes(child, nodes, nextLine)
  }

  /** Sends one harness command (`kill 0`, `call 0 GET k`…); resolves with the reply text after `ok`. */
  command(line) {
    const run = this.queue.then(async () => {
      this.child.stdin.write(line + '\n')
      const reply = await this.lines()
      if (reply.startsWith('error')) throw new Error(`redis-nodes: ${line}: ${reply}`)
      return reply.slice(2).trim()
    })
    this.queue = run.catch(() => {})
    return run
  }

  /** Runs a Redis command on node `i`. */
  call(i, ...args) {
    return this.command(`call ${i} ${args.join(' ')}`)
  }

  /** `postgres` only: runs one SQL statement as the superuser; resolves with what it printed. */
  sql(statement) {
    return this.command(`sql ${statement}`)
  }

  kill(i) {
    return this.command(`kill ${i}`)
  }

  restart(i) {
    return this.command(`restart ${i}`)
  }

  pause(i) {
    return this.command(`pause ${i}`)
  }

  resume(i) {
    return this.command(`resume ${i}`)
  }

  /** Stops every node (closing the harness's stdin) and waits for it to exit. */
  async stop() {
    if (this.child.exitCode !== null) return
    const exited = new Promise((resolve) => this.child.once('exit', resolve))
    this.child.stdin.end()
    await exited
  }
}

/** A resource name unique to this run. */
let counter = 0
function unique(name) {
  counter += 1
  return `${name}:${process.pid}:${counter}`
}

/** Polls `check` until it returns true (no timing assertions: only a generous cap). */
async function eventually(check, { timeoutMs = 20000, intervalMs = 10 } = {}) {
  const deadline = Date.now() + timeoutMs
  for (;;) {
    if (await check()) return
    if (Date.now() > deadline) throw new Error('condition not met in time')
    await new Promise((r) => setTimeout(r, intervalMs))
  }
}

module.exports = { RedisNodes, unique, eventually, ROOT, PACKAGE }
