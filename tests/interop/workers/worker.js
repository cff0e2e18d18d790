// Interop worker (Node front): ITERATIONS times, take the lock, do a
// non-atomic read-modify-write of the counter file, log the critical section.
// With FENCELOCK_INTEROP_ELECT=1 it campaigns instead (announcing "node"); a
// leadership is a lock whose fencing token is its epoch.
//   node worker.js NODES RESOURCE ITERATIONS COUNTER_FILE LOG_FILE   (NODES comma-separated)
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const { setTimeout: sleep } = require('node:timers/promises');
const { Client } = require(path.join(__dirname, '..', '..', '..', 'bindings', 'node'));

// Wall-clock nanoseconds, comparable with the other workers' CLOCK_REALTIME.
// Date.now() has only millisecond precision, so this waits for its next tick
// (at most 1 ms) and returns that edge, which is exact to a few µs. It used
// to be performance.timeOrigin + performance.now(), but Node reads the two
// clocks behind timeOrigin one after the other at start-up. On a loaded
// machine a preemption between the reads skews every timestamp of the
// process by milliseconds. A CI run saw two sections "overlap" by that skew
// while the counter stayed exact.
function nowNs() {
  const current = Date.now();
  let next = Date.now();
  while (next === current) next = Date.now();
  return BigInt(next) * 1000000n;
}

async function main() {
  const [nodes, resource, iterations, counter, log] = process.argv.slice(2);
  const client = new Client({ nodes: nodes.split(',') });
  const elect = process.env.FENCELOCK_INTEROP_ELECT === '1';
  const take = () =>
    elect
      ? client.campaign(resource, { ttl: 10000, wait: 120000, value: 'node' })
      : client.acquire(resource, { ttl: 10000, wait: 120000 });
  try {
    for (let i = 0; i < Number(iterations); i++) {
      const lock = await take();
      const start = nowNs();
      const value = Number(fs.readFileSync(counter, 'utf8').trim() || '0');
      await sleep(3); // widen the window a lost update needs
      fs.writeFileSync(counter, `${value + 1}\n`);
      fs.appendFileSync(log, `node ${lock.fencingToken} ${start} ${nowNs()}\n`);
      await lock.release();
    }
  } finally {
    await client.close();
  }
}

main().catch((error) => {
  console.error(`node worker: ${error.message}`);
  process.exit(1);
});
