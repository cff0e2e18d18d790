// Compiled by tsc (which down-levels `await using` for Node 20) and run by
// test/dispose.test.js with the nodes' URLs in argv; prints one JSON line.
import {
  Client,
  Lock,
  LockLostError,
  NotAcquiredError,
  type AcquireOptions,
  type CampaignOptions,
  type Leader,
  type Leadership,
  type RwLock,
  type Semaphore,
} from 'fencelock'

/** `await using` a semaphore's permit: a Lock, released at block exit. */
async function permits(client: Client, name: string): Promise<{ permit: number | null; busy: boolean; free: number }> {
  const sem: Semaphore = client.semaphore(name, 1)
  let permit: number | null
  let busy: boolean
  {
    await using lock: Lock = await sem.acquire({ ttl: 5000, wait: 1000 })
    permit = lock.permit
    busy = (await sem.tryAcquire({ ttl: 5000 })) === null && sem.permits === 1 && sem.name === name
  }
  // The block exited: the permit was released by Symbol.asyncDispose.
  const free: number = await sem.holders()
  return { permit, busy, free }
}

/** `await using` a reader and a writer of a read-write lock: Locks, released at block exit. */
async function readWrite(
  client: Client,
  name: string,
): Promise<{ shared: boolean; excluded: boolean; writerAfter: boolean; free: boolean }> {
  const rw: RwLock = client.rwLock(name)
  let shared: boolean
  let readerToken: bigint
  {
    await using reader: Lock = await rw.acquireRead({ ttl: 5000, wait: 1000 })
    await using other = await rw.tryRead({ ttl: 5000 })
    readerToken = reader.fencingToken
    shared = other !== null && (await rw.tryWrite({ ttl: 5000 })) === null && rw.name === name
  }
  // The block exited: both readers were released by Symbol.asyncDispose.
  let excluded: boolean
  let writerAfter: boolean
  {
    await using writer = await rw.acquireWrite({ ttl: 5000, wait: 0 })
    excluded = (await rw.tryRead({ ttl: 5000 })) === null
    writerAfter = writer.fencingToken > readerToken
  }
  const free = await rw.tryWrite({ ttl: 5000 })
  await free?.release()
  return { shared, excluded, writerAfter, free: free !== null }
}

/** `await using` a leadership, and `for await` over the election's observers. */
async function elect(client: Client, name: string): Promise<{ epoch: string; seen: string; free: boolean }> {
  const options: CampaignOptions = { ttl: 5000, value: 'host-a:1' }
  let epoch: bigint
  let seen: Leader | undefined
  {
    await using leadership = await client.campaign(name, options)
    epoch = leadership.epoch
    const value: Buffer = leadership.value
    const leading: boolean = leadership.isLeader() && !leadership.signal.aborted && value.length > 0
    for await (const leader of client.observe(name)) {
      if (leading) seen = leader
      break
    }
  }
  // The block exited: the leadership was resigned by Symbol.asyncDispose.
  const next: Leadership | null = await client.campaign(name, { wait: 0 }).catch(() => null)
  await next?.resign()
  return { epoch: epoch.toString(), seen: `${seen?.value.toString()}@${seen?.epoch}`, free: next !== null }
}

async function main(): Promise<void> {
  const nodes: string[] = JSON.parse(process.argv[2] ?? '[]')
  const resource = process.argv[3] ?? 'ts:dispose'
  await using client = new Client({ nodes })
  const options: AcquireOptions = { ttl: 5000, wait: 1000 }
  let inside: { token: bigint; held: boolean; busy: boolean }
  {
    await using lock = await client.acquire(resource, options)
    const token: bigint = lock.fencingToken
    const signal: AbortSignal = lock.signal
    const other: Lock | null = await client.tryAcquire(resource)
    inside = { token, held: lock.isHeld() && !signal.aborted, busy: other === null }
  }
  // The block exited: the lock was released by Symbol.asyncDispose.
  const after = await client.tryAcquire(resource)
  const reacquired = after !== null
  await after?.release()
  const result = await client.using(resource, { ttl: 1000 }, async (signal, lock) => {
    if (signal.reason instanceof LockLostError) throw signal.reason
    return lock.fencingToken
  })
  const election = await elect(client, `${resource}:election`)
  const semaphore = await permits(client, `${resource}:semaphore`)
  const rwLock = await readWrite(client, `${resource}:rw`)
  const error = await client.acquire(resource, { wait: 0 }).then(
    (lock) => lock.release().then(() => null),
    (e: unknown) => (e instanceof NotAcquiredError ? e.code : String(e)),
  )
  console.log(
    JSON.stringify({
      token: inside.token.toString(),
      held: inside.held,
      busy: inside.busy,
      reacquired,
      usingToken: result.toString(),
      error,
      election,
      semaphore,
      rwLock,
    }),
  )
}

main().catch((error) => {
  console.error(error)
  process.exitCode = 1
})
