// Type-checked by `npm run typecheck` and test/dispose.test.js (never run):
// the typings accept exactly the documented option values.
import type { ClientOptions } from 'fencelock'

export const tls12: ClientOptions = { nodes: 'rediss://redis.internal:6380', tlsMinVersion: '1.2' }
export const tls13: ClientOptions = { nodes: ['rediss://redis.internal:6380'], tlsMinVersion: '1.3' }
// @ts-expect-error: TLS 1.1 is never spoken
export const tls11: ClientOptions = { nodes: 'rediss://redis.internal:6380', tlsMinVersion: '1.1' }
// @ts-expect-error: a string, not a number
export const tlsNumber: ClientOptions = { nodes: 'rediss://redis.internal:6380', tlsMinVersion: 1.3 }
