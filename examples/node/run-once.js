'use strict'

// A job that must run once across instances: every instance calls
// `runOnce()` on its schedule; `using()` with `wait: 0` lets exactly one of
// them run the job, and the others skip. The job gets the lock's signal and
// stops if the lock is lost.

const { NotAcquiredError } = require('fencelock')

/** Runs `job(signal)` if no other instance is running it; returns whether it ran. */
async function runOnce(client, name, job) {
  try {
    await client.using(`cron:${name}`, { ttl: 10000, wait: 0 }, (signal) => job(signal))
    return true
  } catch (error) {
    if (error instanceof NotAcquiredError) return false
    throw error
  }
}

module.exports = { runOnce }
