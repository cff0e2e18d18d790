// Type-checked by `npm run typecheck` (never run): the typings of the log records.
import diagnosticsChannel from 'node:diagnostics_channel'
import { LOG_CHANNEL, LOG_LEVELS, getLogLevel, setLogLevel, type LogLevel, type LogRecord } from 'fencelock'

export function follow(print: (line: string) => void): void {
  setLogLevel('debug')
  diagnosticsChannel.subscribe(LOG_CHANNEL, (message: unknown) => {
    const record = message as LogRecord
    const level: LogLevel = record.level
    const resource: string | undefined = record.fields['resource']
    print(`${level} ${record.target} ${record.message} ${resource} ${record.line}`)
  })
}

export const channel: 'fencelock:log' = LOG_CHANNEL
export const most: LogLevel | undefined = LOG_LEVELS[0]
export const now: LogLevel | 'off' = getLogLevel()
setLogLevel('off')
// @ts-expect-error: not a level
setLogLevel('verbose')
// @ts-expect-error: levels are names, not numbers
setLogLevel(4)
// @ts-expect-error: a record is read-only
export const frozen = (record: LogRecord): void => void (record.level = 'warn')
