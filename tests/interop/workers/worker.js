// Interop worker (Node front): ITERATIONS times, take the lock, do a
// non-atomic read-modify-write of the counter file, log the critical section.
//   node worker.js NODES RESOURCE ITERATIONS COUNTER_FILE LOG_FILE   (NODES comma-separated)
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const { setTimeout: sleep } = require('node:timers/promises');
const { Client } = require(path.join(__dirname, '..', '..', '..', 'bindings', 'node'));

const { performance } = require('node:perf_hooks');

// Wall-clock nanoseconds, comparable across processes on one machine: the
// wall-clock time origin plus the monotonic offset, both at sub-ms precision.
const origin = BigInt(Math.floor(performance.timeOrigin * 1000)) * 1000n;
const nowNs = () => origin + BigInt(Math.round(performance.now() * 1e6));

async function main() {
  const [nodes, resource, iterations, counter, log] = process.argv.slice(2);
  const client = new Client({ nodes: nodes.split(',') });
  try {
    for (let i = 0; i < Number(iterations); i++) {
      const lock = await client.acquire(resource, { ttl: 10000, wait: 120000 });
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
