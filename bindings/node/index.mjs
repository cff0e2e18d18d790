// ES module entry: the same objects as the CommonJS entry (index.js).
import fencelock from './index.js'

export const {
  Client,
  Lock,
  Fence,
  FenceLockError,
  NotAcquiredError,
  LockTimeoutError,
  UnavailableError,
  LockLostError,
  NotHeldError,
  StaleTokenError,
  InvalidArgumentError,
  ConfigError,
  AuthError,
  TlsError,
  ClosedError,
  MIN_TTL_MS,
  MAX_TTL_MS,
  MAX_WAIT_MS,
  MAX_HOLDER_ID,
  MAX_RESOURCE_LEN,
  VERSION,
} = fencelock

export default fencelock
