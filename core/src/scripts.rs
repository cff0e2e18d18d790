//! The Lua scripts of the wire protocol, with their return codes.
//!
//! docs/protocol.md §3 is the normative description; any change here is a
//! protocol change and needs a new protocol version.

use std::sync::LazyLock;

/// A script and its SHA1, so calls can go by `EVALSHA`.
pub(crate) struct LuaScript {
    /// For messages about a script (the protocol-document check).
    #[cfg_attr(not(test), allow(dead_code))]
    pub(crate) name: &'static str,
    pub(crate) source: &'static str,
    pub(crate) script: redis::Script,
}

impl LuaScript {
    fn new(name: &'static str, source: &'static str) -> Self {
        LuaScript {
            name,
            source,
            script: redis::Script::new(source),
        }
    }

    pub(crate) fn sha(&self) -> &str {
        self.script.get_hash()
    }
}

/// Shared helper: compares two canonical decimal strings without going through
/// Lua numbers (doubles lose precision above 2^53).
const DECIMAL_LESS: &str = r#"
local function decimal_less(a, b)
  if #a ~= #b then return #a < #b end
  return a < b
end
"#;

/// `ACQUIRE(KEYS = {lock, fence}, ARGV = {token, ttl_ms})`.
///
/// If the lock key is absent, set it to the token with `PX ttl` and return the
/// new value of the fencing counter (`INCR fence`, ≥ 1). Otherwise return 0:
/// held by another owner. Every attempt uses a fresh token.
pub(crate) static ACQUIRE: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(
        "acquire",
        r#"
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return redis.call('INCR', KEYS[2])
end
return 0
"#,
    )
});

/// `RELEASE(KEYS = {lock}, ARGV = {token})`: compare-and-delete.
///
/// Returns 1 when deleted, 0 when another owner holds the key, -1 when absent.
pub(crate) static RELEASE: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(
        "release",
        r#"
local current = redis.call('GET', KEYS[1])
if current == ARGV[1] then
  redis.call('DEL', KEYS[1])
  return 1
end
if current == false then return -1 end
return 0
"#,
    )
});

/// `EXTEND(KEYS = {lock}, ARGV = {token, ttl_ms})`: compare-and-pexpire.
///
/// Returns 1 when extended, 0 when another owner holds the key, -1 when absent.
/// Never re-creates a missing key.
pub(crate) static EXTEND: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(
        "extend",
        r#"
local current = redis.call('GET', KEYS[1])
if current == ARGV[1] then
  redis.call('PEXPIRE', KEYS[1], ARGV[2])
  return 1
end
if current == false then return -1 end
return 0
"#,
    )
});

/// `RAISE_FENCE(KEYS = {fence}, ARGV = {token})`: `counter = max(counter, token)`.
///
/// Returns 1 when the counter was raised, 0 when it was already at least `token`.
pub(crate) static RAISE_FENCE: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(
        "raise_fence",
        concat_script(&[
            DECIMAL_LESS,
            r#"
local current = redis.call('GET', KEYS[1]) or '0'
if decimal_less(current, ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1])
  return 1
end
return 0
"#,
        ]),
    )
});

/// `FENCED_SET(KEYS = {data}, ARGV = {token, holder, value})`.
///
/// The data key is a hash with fields `fence`, `holder` and `value`. The
/// write happens when no fence is stored, when `token > fence`, or when
/// `token == fence` and the same non-zero holder id stored it (the same
/// grant writing again; holder `0` is a bare token). Returns 1 when
/// written, 0 when the token is stale.
pub(crate) static FENCED_SET: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(
        "fenced_set",
        concat_script(&[
            DECIMAL_LESS,
            r#"
local stored = redis.call('HMGET', KEYS[1], 'fence', 'holder')
if stored[1] then
  if decimal_less(ARGV[1], stored[1]) then return 0 end
  if ARGV[1] == stored[1] and (ARGV[2] == '0' or ARGV[2] ~= stored[2]) then return 0 end
end
redis.call('HSET', KEYS[1], 'fence', ARGV[1], 'holder', ARGV[2], 'value', ARGV[3])
return 1
"#,
        ]),
    )
});

/// `FENCED_GET(KEYS = {data})`: `{value, fence}` of a fenced hash, or nil.
pub(crate) static FENCED_GET: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(
        "fenced_get",
        r#"
local fields = redis.call('HMGET', KEYS[1], 'value', 'fence')
if not fields[2] then return false end
return fields
"#,
    )
});

/// `STATUS(KEYS = {lock, fence})`: `{exists, pttl, counter}` for operators
/// (never the token itself).
pub(crate) static STATUS: LazyLock<LuaScript> = LazyLock::new(|| {
    LuaScript::new(
        "status",
        r#"
local exists = redis.call('EXISTS', KEYS[1])
local pttl = redis.call('PTTL', KEYS[1])
local counter = redis.call('GET', KEYS[2]) or '0'
return {exists, pttl, counter}
"#,
    )
});

fn concat_script(parts: &[&str]) -> &'static str {
    Box::leak(parts.concat().into_boxed_str())
}

/// Every script, for pre-loading and the protocol document check.
pub(crate) fn all() -> [&'static LuaScript; 7] {
    [
        &ACQUIRE,
        &FENCED_GET,
        &RELEASE,
        &EXTEND,
        &RAISE_FENCE,
        &FENCED_SET,
        &STATUS,
    ]
}

#[cfg(test)]
mod tests {
    /// docs/protocol.md is the contract other implementations are written
    /// from: every script must appear there exactly as it is sent.
    #[test]
    fn protocol_document_carries_every_script_verbatim() {
        let doc_path = concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/protocol.md");
        let doc = std::fs::read_to_string(doc_path).expect("docs/protocol.md exists");
        for script in super::all() {
            assert!(
                doc.contains(script.source.trim()),
                "docs/protocol.md does not carry the {} script as sent; update the document",
                script.name
            );
        }
    }

    /// tests/vectors/protocol.json holds each script's SHA1 and cases with
    /// their replies; every front and the independent implementation check
    /// the same file. Here the scripts as sent are replayed on a real node.
    #[test]
    fn scripts_match_the_shared_test_vectors() {
        let vectors: serde_json::Value =
            serde_json::from_str(include_str!("../../tests/vectors/protocol.json")).expect("valid JSON");
        for script in super::all() {
            let name = script.name.to_uppercase();
            assert_eq!(vectors["scripts"][&name], script.sha(), "SHA1 of {name}");
        }
        let node = fencelock_harness::RedisNode::start(&fencelock_harness::NodeOptions::default());
        let mut connection = node.connection();
        for case in vectors["script_cases"].as_array().expect("script_cases") {
            let _: () = redis::cmd("FLUSHALL").query(&mut connection).unwrap();
            for command in case["setup"].as_array().unwrap() {
                let words: Vec<&str> = command
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|w| w.as_str().unwrap())
                    .collect();
                let _: redis::Value = redis::cmd(words[0])
                    .arg(&words[1..])
                    .query(&mut connection)
                    .unwrap();
            }
            let name = case["script"].as_str().unwrap();
            let script = super::all()
                .into_iter()
                .find(|s| s.name.eq_ignore_ascii_case(name))
                .expect("a known script");
            let strings = |field: &str| -> Vec<String> {
                case[field]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|w| w.as_str().unwrap().to_owned())
                    .collect()
            };
            let (keys, args) = (strings("keys"), strings("args"));
            let reply: redis::Value = redis::cmd("EVAL")
                .arg(script.source)
                .arg(keys.len())
                .arg(&keys)
                .arg(&args)
                .query(&mut connection)
                .unwrap();
            assert_eq!(as_json(&reply), case["reply"], "{name}: {}", case["why"]);
        }
    }

    fn as_json(value: &redis::Value) -> serde_json::Value {
        match value {
            redis::Value::Nil => serde_json::Value::Null,
            redis::Value::Int(n) => (*n).into(),
            redis::Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into(),
            redis::Value::Array(items) => items.iter().map(as_json).collect(),
            other => panic!("unexpected reply {other:?}"),
        }
    }
}
