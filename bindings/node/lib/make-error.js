'use strict'

// `makeError`, which the addon calls (on the JavaScript thread) to turn a
// core error into the class of its kind.

const errors = require('./errors.js')
const { FenceLockError } = errors

/** The class of each core kind, from the classes errors.js exports. */
const CLASSES = Object.fromEntries(
  Object.values(errors)
    .filter((Class) => Class !== FenceLockError)
    .map((Class) => [Class.kind, Class]),
)

/** Builds the error of a core kind (called by the addon on the JS thread). */
function makeError(kind, message, resource, nodes) {
  const Class = CLASSES[kind] ?? FenceLockError
  const reports = nodes.map(([node, outcome, detail]) => ({ node, outcome, detail }))
  const text =
    reports.length === 0 ? message : `${message} [${reports.map((r) => `${r.node}: ${r.detail}`).join('; ')}]`
  const error = new Class(text, { resource, nodes: reports })
  if (Class === FenceLockError) {
    // A kind newer than this file: keep the core's name for it.
    error.kind = kind
    error.code = kind.toUpperCase()
  }
  return error
}

module.exports = { makeError }
