// Type-checked by `npm run typecheck` and test/dispose.test.js (never run):
// the typings accept exactly the documented option values.
import type {
  AcquireOptions,
  CampaignOptions,
  Client,
  ClientOptions,
  FencedValue,
  Lock,
  NodeLockState,
  ObserveOptions,
  MAX_PERMITS,
} from 'fencelock'

export const tls12: ClientOptions = { nodes: 'rediss://redis.internal:6380', tlsMinVersion: '1.2' }
export const tls13: ClientOptions = { nodes: ['rediss://redis.internal:6380'], tlsMinVersion: '1.3' }
// @ts-expect-error: TLS 1.1 is never spoken
export const tls11: ClientOptions = { nodes: 'rediss://redis.internal:6380', tlsMinVersion: '1.1' }
// @ts-expect-error: a string, not a number
export const tlsNumber: ClientOptions = { nodes: 'rediss://redis.internal:6380', tlsMinVersion: 1.3 }

// The settings the addon's options describe (native.d.ts) reach the package's type.
export const everySetting: ClientOptions = {
  nodes: ['redis://a:6379', 'redis://b:6379', 'redis://c:6379'],
  keyPrefix: 'app:',
  nodeTimeoutMs: 100,
  connectTimeoutMs: 1000,
  driftFactor: 0.01,
  retryBaseDelayMs: 10,
  retryMaxDelayMs: 500,
  defaultTtlMs: 30000,
  defaultWaitMs: 10000,
  autoRenew: true,
  username: 'app',
  password: 'secret',
  tlsCaPem: Buffer.from('-----BEGIN CERTIFICATE-----'),
  tlsClientCertPem: 'cert',
  tlsClientKeyPem: Buffer.from('key'),
  allowMixedTls: false,
}
// @ts-expect-error: not an option
export const unknownSetting: ClientOptions = { nodes: 'redis://a:6379', timeoutMs: 5 }

// The addon's result types are the package's own.
export function describeState(state: NodeLockState, stored: FencedValue | null): string {
  return `${state.node} ${state.held} ${state.fencingCounter} ${stored?.fencingToken ?? 0n}`
}

// Every acquire option, fair waiting included.
export const everyAcquireOption: AcquireOptions = {
  ttl: 10000,
  wait: 2000,
  autoRenew: true,
  maxHold: 60000,
  maxRenewals: 10,
  fair: true,
}
// @ts-expect-error: fair is a boolean
export const fairString: AcquireOptions = { fair: 'yes' }

// Every campaign option; the value is text or bytes.
export const everyCampaignOption: CampaignOptions = {
  ttl: 10000,
  wait: 2000,
  value: 'host-a:8080',
  signal: AbortSignal.timeout(1000),
}
export const bytesValue: CampaignOptions = { value: new Uint8Array([1, 2, 3]) }
// @ts-expect-error: a value is text or bytes, not a number
export const numberValue: CampaignOptions = { value: 42 }
// @ts-expect-error: a leadership always renews; lock-only options are not campaign options
export const campaignFair: CampaignOptions = { fair: true }
export const observeOptions: ObserveOptions = { signal: AbortSignal.timeout(1000) }

// A semaphore's permits take the acquire options; a permit is a Lock with its number.
export async function permitOptions(client: Client, size: typeof MAX_PERMITS): Promise<number | null> {
  const sem = client.semaphore('pool', size)
  const lock = await sem.acquire({ ...everyAcquireOption, signal: AbortSignal.timeout(1000) })
  const maybe = await sem.tryAcquire({ ttl: 1000, fair: true })
  const held: number = await sem.holders()
  // @ts-expect-error: a try takes no wait
  await sem.tryAcquire({ wait: 10 })
  // @ts-expect-error: permits is a number
  client.semaphore('pool', '4')
  return held > 0 ? lock.permit : (maybe?.permit ?? null)
}

// A read-write lock's readers and writers take the acquire options; each grant is a Lock.
export async function rwOptions(client: Client): Promise<bigint> {
  const rw = client.rwLock('config')
  const name: string = rw.name
  const reader = await rw.acquireRead({ ...everyAcquireOption, signal: AbortSignal.timeout(1000) })
  const writer = await rw.acquireWrite({ ttl: 1000, wait: 0, fair: true })
  const maybeReader: Lock | null = await rw.tryRead({ ttl: 1000 })
  const maybeWriter: Lock | null = await rw.tryWrite({ ttl: 1000, autoRenew: false })
  // @ts-expect-error: a try takes no wait
  await rw.tryRead({ wait: 10 })
  // @ts-expect-error: nor a signal
  await rw.tryWrite({ signal: AbortSignal.timeout(1000) })
  // @ts-expect-error: a read-write lock has no permits
  client.rwLock('config', 2)
  return name.length > 0 ? reader.fencingToken : (maybeReader ?? maybeWriter ?? writer).fencingToken
}
