'use strict'

// One worker of bench/contention/contention.py for the Node libraries:
//   node contention-worker.js CONTENDER HOLD_S START_AT END_AT RESOURCE URL...
// START_AT and END_AT are CLOCK_MONOTONIC seconds (Python's time.monotonic(),
// Node's process.hrtime), so the driver can order every worker's grants.
// Loops acquire -> hold -> release on RESOURCE from START_AT to END_AT, then
// prints one JSON line: { samples: [[asked, granted, released], ...], cpu }
// (granted and released are null for a call still waiting at the end).
// With FENCELOCK_BENCH_PERMITS=K the semaphore contenders take one of K permits.

const { requireReleaseBuild } = require('./release-build.js')
requireReleaseBuild()

const { Client, LockTimeoutError } = require('..')
const Redis = require('ioredis')
const Redlock = require('redlock')
const { Mutex, RedlockMutex, Semaphore, RedlockSemaphore } = require('redis-semaphore')

const TTL_MS = 10000
const PERMITS = Number(process.env.FENCELOCK_BENCH_PERMITS || 0)
const now = () => Number(process.hrtime.bigint()) / 1e9
const sleep = (seconds) => new Promise((resolve) => setTimeout(resolve, seconds * 1000))

/** Each contender: `acquire(timeoutS)` resolves a release function, or null on timeout. */
const CONTENDERS = {
  'fencelock node default': (urls, resource) => fencelock(urls, resource, false),
  'fencelock node fair': (urls, resource) => fencelock(urls, resource, true),
  'node-redlock': (urls, resource) => redlock(urls, resource, {}),
  'node-redlock 5 ms': (urls, resource) => redlock(urls, resource, { retryDelay: 5, retryJitter: 5 }),
  'redis-semaphore': (urls, resource) => semaphore(urls, resource, {}),
  'redis-semaphore 5 ms': (urls, resource) => semaphore(urls, resource, { retryInterval: 5 }),
  'fencelock node semaphore': (urls, resource) => fencelockSemaphore(urls, resource),
  'redis-semaphore Semaphore': (urls, resource) => semaphore(urls, resource, {}, PERMITS),
  'redis-semaphore Semaphore 5 ms': (urls, resource) => semaphore(urls, resource, { retryInterval: 5 }, PERMITS),
}

function fencelock(urls, resource, fair) {
  const client = new Client({ nodes: urls })
  return async (timeout) => {
    try {
      const lock = await client.acquire(resource, { ttl: TTL_MS, wait: Math.floor(timeout * 1000), fair })
      return () => lock.release()
    } catch (error) {
      if (error instanceof LockTimeoutError) return null
      throw error
    }
  }
}

function fencelockSemaphore(urls, resource) {
  const semaphore = new Client({ nodes: urls }).semaphore(resource, PERMITS)
  return async (timeout) => {
    try {
      const permit = await semaphore.acquire({ ttl: TTL_MS, wait: Math.floor(timeout * 1000) })
      return () => permit.release()
    } catch (error) {
      if (error instanceof LockTimeoutError) return null
      throw error
    }
  }
}

function redlock(urls, resource, retry) {
  const clients = urls.map((url) => new Redis(url))
  // Unlimited retries: the driver's deadline ends a wait.
  const locker = new Redlock(clients, { retryCount: -1, ...retry })
  return async () => {
    const lock = await locker.lock(resource, TTL_MS)
    return () => lock.unlock()
  }
}

/** redis-semaphore's Mutex / RedlockMutex, or with `permits` its Semaphore / RedlockSemaphore. */
function semaphore(urls, resource, retry, permits = 0) {
  const clients = urls.map((url) => new Redis(url))
  return async (timeout) => {
    const options = { lockTimeout: TTL_MS, acquireTimeout: Math.max(1, timeout * 1000), refreshInterval: 0, ...retry }
    const single = clients.length === 1
    const mutex =
      permits > 0
        ? single
          ? new Semaphore(clients[0], resource, permits, options)
          : new RedlockSemaphore(clients, resource, permits, options)
        : single
          ? new Mutex(clients[0], resource, options)
          : new RedlockMutex(clients, resource, options)
    if (!(await mutex.tryAcquire())) {
      try {
        await mutex.acquire()
      } catch {
        return null
      }
    }
    return () => mutex.release()
  }
}

async function main() {
  const [contender, hold, startAt, endAt, resource, ...urls] = process.argv.slice(2)
  const acquire = CONTENDERS[contender](urls, resource)
  const end = Number(endAt)
  const samples = []
  while (now() < Number(startAt)) await sleep(0.001)
  const cpuStart = process.cpuUsage()
  const deadline = new Promise((resolve) => setTimeout(() => resolve('deadline'), (end - now()) * 1000))
  while (now() < end) {
    const asked = now()
    const release = await Promise.race([acquire(end - asked), deadline])
    if (release === 'deadline' || release === null) {
      samples.push([asked, null, null])
      if (release === 'deadline') break
      continue
    }
    const granted = now()
    if (Number(hold) > 0) await sleep(Number(hold))
    const released = now()
    await release()
    samples.push([asked, granted, released])
  }
  const cpu = process.cpuUsage(cpuStart)
  process.stdout.write(JSON.stringify({ samples, cpu: (cpu.user + cpu.system) / 1e6 }) + '\n', () => process.exit(0))
}

main().catch((error) => {
  console.error(error)
  process.exit(1)
})
