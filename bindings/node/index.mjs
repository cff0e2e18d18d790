// ES module entry: the same objects as the CommonJS entry (index.js), whose
// names Node finds in its module.exports.
export * from './index.js'
export { default } from './index.js'
