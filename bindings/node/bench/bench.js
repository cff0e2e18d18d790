'use strict'

// Uncontended acquire+release cycles: fencelock against redlock (with
// ioredis) and redis-semaphore (Mutex / RedlockMutex), in the same run, on
// the same redis-server nodes, with 32 concurrent async loops on distinct
// keys, at 1 node and at 5 nodes. Prints throughput, p50/p99 latency,
// same-run ratios, and the CPU time this process and the Redis nodes spent
// per cycle. Not a test: the numbers depend on the machine.
//
// A fourth row, "ioredis + our scripts", is not a library: it is fencelock's
// wire protocol (the acquire script with its fencing INCR, then the
// release script, both read from docs/protocol.md) sent bare through
// ioredis. Beside redis-semaphore's Mutex (the same ioredis, acquiring with
// a plain SET) its Redis CPU shows what issuing the fencing token
// atomically with the grant costs Redis, which any client of that protocol
// pays, apart from the client's own cost.
//
//   cd bindings/node/bench && npm install && node bench.js [seconds-per-run] [rounds]
//
// The machine is shared and noisy: each library runs ROUNDS times; a round
// runs every library once, back to back, in rotating order. The absolute
// columns show each library's median run; each ratio is the median of the
// per-round ratios (both libraries measured seconds apart, so a slow spell
// of the machine hits both), and the range of those ratios is printed below
// the table.

const crypto = require('node:crypto')
const fs = require('node:fs')
const path = require('node:path')
const { Client } = require('..')
const { RedisNodes } = require('../test/helpers.js')
const { requireReleaseBuild } = require('./release-build.js')
const Redis = require('ioredis')
const Redlock = require('redlock')
const { Mutex, RedlockMutex } = require('redis-semaphore')

const LOOPS = 32
const TTL_MS = 10000
const SECONDS = Number(process.argv[2] ?? 1.5)
const ROUNDS = Number(process.argv[3] ?? 5)
const WARMUP_MS = 500

/**
 * One of fencelock's scripts as docs/protocol.md carries it (the first `lua`
 * block of its §3 section, with the newlines inside the fences), for the
 * bare-protocol row; its SHA1 is checked against tests/vectors/protocol.json,
 * so the row cannot measure a script the protocol no longer has.
 */
function protocolScript(name) {
  const doc = fs.readFileSync(path.join(__dirname, '../../../docs/protocol.md'), 'utf8').replace(/\r\n/g, '\n')
  // `### 3.1 ACQUIRE`: the script's name is the heading's word after its number.
  const section = doc.split('\n### 3.').find((s) => /^\d+ (\S+)/.exec(s)?.[1] === name)
  if (section === undefined) throw new Error(`docs/protocol.md has no §3 section for ${name}`)
  const body = section.split('```lua')[1]?.split('\n```')[0]
  if (body === undefined) throw new Error(`docs/protocol.md's §3 section for ${name} has no lua block`)
  const source = body + '\n'
  const sha = crypto.createHash('sha1').update(source).digest('hex')
  const { scripts } = require('../../../tests/vectors/protocol.json')
  if (sha !== scripts[name]) {
    throw new Error(`docs/protocol.md's ${name} has SHA1 ${sha}, tests/vectors/protocol.json says ${scripts[name]}`)
  }
  return source
}

let bareScripts
/** ACQUIRE and RELEASE for the bare-protocol row, read and checked once. */
function bareProtocolScripts() {
  bareScripts ??= { acquire: protocolScript('ACQUIRE'), release: protocolScript('RELEASE') }
  return bareScripts
}

/** CPU seconds the Redis nodes have used so far (`INFO cpu`, user + system). */
async function redisCpuSeconds(probes) {
  let total = 0
  for (const probe of probes) {
    const info = await probe.info('cpu')
    for (const field of ['used_cpu_sys', 'used_cpu_user']) {
      total += Number(new RegExp(`^${field}:([0-9.]+)`, 'm').exec(info)[1])
    }
  }
  return total
}

/** CPU seconds this process (every thread, the addon's included) has used so far. */
function ownCpuSeconds() {
  const { user, system } = process.cpuUsage()
  return (user + system) / 1e6
}

/**
 * Runs `LOOPS` loops of `cycle(loopIndex)` for `SECONDS`; returns cycles/s,
 * latencies, and the CPU µs per cycle of this process and of the nodes.
 */
async function measure(probes, makeCycle) {
  const cycles = []
  for (let i = 0; i < LOOPS; i++) cycles.push(await makeCycle(i))
  let recording = false
  let stop = false
  const latencies = []
  const loop = async (cycle) => {
    while (!stop) {
      const start = process.hrtime.bigint()
      await cycle()
      if (recording) latencies.push(Number(process.hrtime.bigint() - start) / 1000)
    }
  }
  const running = cycles.map(loop)
  await new Promise((r) => setTimeout(r, WARMUP_MS))
  const [ownBefore, redisBefore] = [ownCpuSeconds(), await redisCpuSeconds(probes)]
  recording = true
  const began = process.hrtime.bigint()
  await new Promise((r) => setTimeout(r, SECONDS * 1000))
  recording = false
  const elapsed = Number(process.hrtime.bigint() - began) / 1e9
  const [ownAfter, redisAfter] = [ownCpuSeconds(), await redisCpuSeconds(probes)]
  stop = true
  await Promise.all(running)
  latencies.sort((a, b) => a - b)
  const at = (q) => latencies[Math.min(latencies.length - 1, Math.floor(q * latencies.length))]
  const perCycle = (seconds) => (seconds * 1e6) / Math.max(1, latencies.length)
  return {
    throughput: latencies.length / elapsed,
    p50: at(0.5),
    p99: at(0.99),
    ownCpu: perCycle(ownAfter - ownBefore),
    redisCpu: perCycle(redisAfter - redisBefore),
  }
}

async function fencelockCycles(urls, tag, probes) {
  const client = new Client({ nodes: urls })
  const result = await measure(probes, async (i) => {
    const resource = `bench:fencelock:${tag}:${i}`
    return async () => {
      const lock = await client.acquire(resource, { ttl: TTL_MS, wait: 0 })
      await lock.release()
    }
  })
  await client.close()
  return result
}

async function redlockCycles(urls, tag, probes) {
  const clients = urls.map((url) => new Redis(url))
  const redlock = new Redlock(clients, { retryCount: 0, driftFactor: 0.01 })
  redlock.on('clientError', () => {})
  const result = await measure(probes, async (i) => {
    const resource = `bench:redlock:${tag}:${i}`
    return async () => {
      const lock = await redlock.lock(resource, TTL_MS)
      await lock.unlock()
    }
  })
  await Promise.all(clients.map((c) => c.quit()))
  return result
}

async function semaphoreCycles(urls, tag, probes) {
  const clients = urls.map((url) => new Redis(url))
  const options = { lockTimeout: TTL_MS, acquireTimeout: 1000, refreshInterval: TTL_MS * 0.8 }
  const result = await measure(probes, async (i) => {
    const key = `bench:semaphore:${tag}:${i}`
    const mutex = clients.length === 1 ? new Mutex(clients[0], key, options) : new RedlockMutex(clients, key, options)
    return async () => {
      await mutex.acquire()
      await mutex.release()
    }
  })
  await Promise.all(clients.map((c) => c.quit()))
  return result
}

async function bareProtocolCycles(urls, tag, probes) {
  const clients = urls.map((url) => new Redis(url))
  const { acquire, release } = bareProtocolScripts()
  for (const c of clients) {
    c.defineCommand('fencelockAcquire', { numberOfKeys: 4, lua: acquire })
    c.defineCommand('fencelockRelease', { numberOfKeys: 3, lua: release })
  }
  const result = await measure(probes, async (i) => {
    const key = `bench:bare:{${tag}:${i}}`
    const [fence, queue, leases] = [`${key}:fence`, `${key}:queue`, `${key}:leases`]
    return async () => {
      const token = crypto.randomBytes(16).toString('hex')
      // An attempt that will not wait (no waiter id), as an uncontended acquire (§3.1).
      const granted = await Promise.all(
        clients.map((c) => c.fencelockAcquire(key, fence, queue, leases, token, TTL_MS, '', '0', '1000', '0')),
      )
      if (!granted.every((n) => n >= 1)) throw new Error(`bare acquire refused: ${granted}`)
      // Nobody queued, so no hand-off: window_ms and counted as our clients send them (§3.2).
      await Promise.all(clients.map((c) => c.fencelockRelease(key, queue, leases, token, '200', '1', '')))
    }
  })
  await Promise.all(clients.map((c) => c.quit()))
  return result
}

/** `x` as a ratio, e.g. `1.23×`. */
function times(x) {
  return Number.isFinite(x) ? x.toFixed(2) + '×' : '—'
}

function medianOf(values) {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor(sorted.length / 2)]
}

/** Round-by-round ratios of one library's runs to another's: `field` of `runs` over `base`. */
function perRound(runs, base, field) {
  return runs.map((r, round) => r[field] / base[round][field])
}

/** A table row: the library's median run, and the medians of its per-round ratios. */
function row(name, runs, redlock, semaphore) {
  const r = medianRun(runs)
  return [
    name.padEnd(22),
    r.throughput.toFixed(0).padStart(9),
    r.p50.toFixed(0).padStart(8),
    r.p99.toFixed(0).padStart(8),
    times(medianOf(perRound(runs, redlock, 'throughput'))).padStart(12),
    times(medianOf(perRound(runs, semaphore, 'throughput'))).padStart(14),
    times(medianOf(perRound(runs, redlock, 'p50'))).padStart(11),
    r.ownCpu.toFixed(1).padStart(12),
    r.redisCpu.toFixed(1).padStart(12),
  ].join(' ')
}

/** The run with the median throughput. */
function medianRun(runs) {
  return [...runs].sort((a, b) => a.throughput - b.throughput)[Math.floor(runs.length / 2)]
}

/** `min–max` of fencelock's per-round throughput ratios to `base`. */
function spread(runs, base) {
  const ratios = perRound(runs, base, 'throughput')
  return `${times(Math.min(...ratios))}–${times(Math.max(...ratios))}`
}

async function main() {
  // Before any node starts: a release addon, and the document's scripts must be the vectors'.
  requireReleaseBuild()
  bareProtocolScripts()
  const nodes = await RedisNodes.start(5)
  const probes = nodes.urls.map((url) => new Redis(url))
  try {
    console.log(
      `acquire+release cycles, ${LOOPS} concurrent loops on distinct keys, ${SECONDS} s per run, Node ${process.version}`,
    )
    for (const count of [1, 5]) {
      const urls = nodes.urls.slice(0, count)
      const tag = `${count}n`
      const runners = {
        fencelock: fencelockCycles,
        redlock: redlockCycles,
        semaphore: semaphoreCycles,
        bare: bareProtocolCycles,
      }
      const runs = { fencelock: [], redlock: [], semaphore: [], bare: [] }
      const order = Object.keys(runners)
      for (let round = 0; round < ROUNDS; round++) {
        for (let k = 0; k < order.length; k++) {
          const name = order[(round + k) % order.length]
          runs[name].push(await runners[name](urls, tag, probes.slice(0, count)))
        }
      }
      const { fencelock: f, redlock: rl, semaphore: s, bare } = runs
      console.log(`\n${count} node${count > 1 ? 's' : ''} (${ROUNDS} rounds; medians, ratios per round)`)
      console.log(
        [
          'library'.padEnd(22),
          'cycles/s'.padStart(9),
          'p50 µs'.padStart(8),
          'p99 µs'.padStart(8),
          'vs redlock'.padStart(12),
          'vs semaphore'.padStart(14),
          'p50 vs rl'.padStart(11),
          'own CPU µs'.padStart(12),
          'redis CPU µs'.padStart(12),
        ].join(' '),
      )
      console.log(row('fencelock', f, rl, s))
      console.log(row('redlock 4 + ioredis', rl, rl, s))
      console.log(row(count === 1 ? 'redis-semaphore Mutex' : 'redis-semaphore Redlock', s, rl, s))
      console.log(row('ioredis + our scripts', bare, rl, s))
      console.log(`fencelock's throughput per round: ${spread(f, rl)} redlock's, ${spread(f, s)} redis-semaphore's`)
    }
    console.log(
      '\n(CPU µs per cycle: "own" is this process, every thread; "redis" is all nodes together.',
      "The last row is not a library but fencelock's protocol sent bare through ioredis:",
      "its Redis CPU beside redis-semaphore's (same ioredis, plain SET) is what the atomic fencing token costs.)",
    )
  } finally {
    await Promise.all(probes.map((p) => p.quit()))
    await nodes.stop()
  }
}

main().catch((error) => {
  console.error(error)
  process.exitCode = 1
})
