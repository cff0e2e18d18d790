// Interop worker (Node front): ITERATIONS times, take the lock, do a
// non-atomic read-modify-write of the counter file, log the critical section.
// FENCELOCK_INTEROP_TAKE (see worker.py) says what it takes instead: `elect`
// campaigns (announcing "node", also FENCELOCK_INTEROP_ELECT=1; a leadership is
// a lock whose fencing token is its epoch), `permits:K` a permit (logged as a
// fifth field, counter untouched), `rw` reads (even iterations, `r`) and writes
// (odd, `w`). FENCELOCK_INTEROP_NODE_TIMEOUT_MS, if set (not empty), is the
// per-node timeout in milliseconds (anything else fails the worker).
//   node worker.js NODES RESOURCE ITERATIONS COUNTER_FILE LOG_FILE   (NODES comma-separated)
'use strict';

const fs = require('node:fs');
const path = require('node:path');
const { setTimeout: sleep } = require('node:timers/promises');
// The repository's front, or an installed package (interop.py says which).
const { Client } = require(
  process.env.FENCELOCK_NODE_PACKAGE || path.join(__dirname, '..', '..', '..', 'bindings', 'node'),
);

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
  const timeout = process.env.FENCELOCK_INTEROP_NODE_TIMEOUT_MS;
  if (timeout && !/^[0-9]+$/.test(timeout)) {
    throw new Error(`FENCELOCK_INTEROP_NODE_TIMEOUT_MS is not a number of milliseconds: '${timeout}'`);
  }
  const client = new Client({ nodes: nodes.split(','), nodeTimeoutMs: timeout ? Number(timeout) : undefined });
  const mode =
    process.env.FENCELOCK_INTEROP_ELECT === '1' ? 'elect' : process.env.FENCELOCK_INTEROP_TAKE || 'lock';
  const options = { ttl: 10000, wait: 120000 };
  // What iteration i takes, whether it writes the counter, and what it logs last.
  const take = async (i) => {
    if (mode === 'elect') return [await client.campaign(resource, { ...options, value: 'node' }), true, ''];
    if (mode.startsWith('permits:')) {
      const permit = await client.semaphore(resource, Number(mode.split(':')[1])).acquire(options);
      return [permit, false, ` ${permit.permit}`];
    }
    if (mode === 'rw') {
      const rw = client.rwLock(resource);
      return i % 2 === 1 ? [await rw.acquireWrite(options), true, ' w'] : [await rw.acquireRead(options), false, ' r'];
    }
    return [await client.acquire(resource, options), true, ''];
  };
  try {
    for (let i = 0; i < Number(iterations); i++) {
      const [lock, writes, extra] = await take(i);
      const start = nowNs();
      const value = writes ? Number(fs.readFileSync(counter, 'utf8').trim() || '0') : 0;
      await sleep(3); // widen the window a lost update needs
      if (writes) fs.writeFileSync(counter, `${value + 1}\n`);
      fs.appendFileSync(log, `node ${lock.fencingToken} ${start} ${nowNs()}${extra}\n`);
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
