//! The PostgreSQL store's SQL layer (core/sql/fencelock.sql, docs/postgres-store.md): the
//! protocol's scripts ported to PL/pgSQL over a Redis-subset key model, on a real server.
//!
//! Every `script_cases` entry of tests/vectors/protocol.json must give its reply, and leave the
//! keys as the Lua leaves them on a real Redis (the scripts taken from docs/protocol.md, checked
//! against the vectors' SHA1). The primitives are checked against Redis's semantics, PUBLISH
//! against a listener session holding its advisory lock, and the least privileges a role needs.

use std::collections::{BTreeMap, BTreeSet};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fencelock_harness::{NodeOptions, PostgresNode, RedisNode, postgres_bin_dir};
use serde_json::{Value, json};

/// The schema the tests migrate into.
const SCHEMA: &str = "fl_test";

/// core/sql/fencelock.sql with the schema placeholder replaced as the core does: by a quoted
/// identifier.
fn migration(schema: &str) -> String {
    include_str!("../sql/fencelock.sql").replace("__SCHEMA__", &format!("\"{schema}\""))
}

fn migrated_node() -> PostgresNode {
    let node = PostgresNode::start();
    node.sql(&migration(SCHEMA));
    node
}

fn vectors() -> Value {
    serde_json::from_str(include_str!("../../tests/vectors/protocol.json")).expect("valid JSON")
}

/// An SQL string literal.
fn quote(text: &str) -> String {
    format!("'{}'", text.replace('\'', "''"))
}

fn text_array(items: &[String]) -> String {
    let items: Vec<String> = items.iter().map(|item| quote(item)).collect();
    format!("ARRAY[{}]::text[]", items.join(", "))
}

fn strings(value: &Value) -> Vec<String> {
    value
        .as_array()
        .expect("an array")
        .iter()
        .map(|word| word.as_str().expect("a string").to_owned())
        .collect()
}

/// Each script's Lua source as docs/protocol.md carries it (§3.x, the first `lua` block of the
/// section; the newlines after the opening fence and before the closing one belong to it).
fn lua_sources() -> BTreeMap<String, String> {
    let doc = include_str!("../../docs/protocol.md");
    let mut sources = BTreeMap::new();
    let mut rest = doc;
    while let Some(at) = rest.find("\n### 3.") {
        rest = &rest[at + 1..];
        let heading = rest.lines().next().expect("a heading");
        let name = heading.rsplit(' ').next().expect("a script name").to_owned();
        let section_end = rest[1..].find("\n#").map_or(rest.len(), |end| end + 1);
        if let Some(open) = rest[..section_end].find("```lua\n") {
            let body = &rest[open + "```lua".len()..];
            let close = body.find("\n```").expect("a closing fence");
            sources.insert(name, body[..close + 1].to_owned());
        }
    }
    sources
}

/// The SQL that dumps every live key as `{key: {kind, value, pttl}}` (zset members with their
/// scores as Redis writes them, set members sorted, hash fields as an object).
fn dump_sql(schema: &str) -> String {
    format!(
        "SELECT coalesce(jsonb_object_agg(d.key, d.entry), '{{}}') FROM (
           SELECT k.key, jsonb_build_object('kind', k.kind, 'pttl', {schema}.pttl(k.key), 'value',
             CASE k.kind
               WHEN 'string' THEN to_jsonb(k.value)
               WHEN 'zset' THEN (SELECT jsonb_agg(jsonb_build_array(z.member, {schema}.score_text(z.score))
                                   ORDER BY z.score, z.member)
                                   FROM {schema}.zset_members z WHERE z.key = k.key)
               WHEN 'set' THEN (SELECT jsonb_agg(s.member ORDER BY s.member)
                                  FROM {schema}.set_members s WHERE s.key = k.key)
               ELSE (SELECT jsonb_object_agg(h.field, h.value) FROM {schema}.hash_fields h WHERE h.key = k.key)
             END) AS entry
           FROM {schema}.keys k WHERE {schema}.pttl(k.key) <> -2) d"
    )
}

/// Counts members whose key row is gone (the cascade should have taken them).
const ORPHANS_SQL: &str = "SELECT (SELECT count(*) FROM __SCHEMA__.zset_members m WHERE NOT EXISTS \
       (SELECT 1 FROM __SCHEMA__.keys k WHERE k.key = m.key)) \
     + (SELECT count(*) FROM __SCHEMA__.set_members m WHERE NOT EXISTS \
       (SELECT 1 FROM __SCHEMA__.keys k WHERE k.key = m.key)) \
     + (SELECT count(*) FROM __SCHEMA__.hash_fields m WHERE NOT EXISTS \
       (SELECT 1 FROM __SCHEMA__.keys k WHERE k.key = m.key))";

/// What one run of a case on PostgreSQL gave: its reply, the keys after, and
/// the messages it published on the channels the case expects messages on
/// (each `[channel, message]`).
struct PostgresRun {
    reply: Value,
    state: Value,
    published: Vec<Value>,
}

/// The channels a case's messages may go to: those its `published` names,
/// and the wake-up channel (docs/protocol.md §4.9) of every waiter id in
/// its setup and arguments, under the prefix of its first key. Empty for a
/// case without `published`.
fn channels_to_hear(case: &Value) -> BTreeSet<String> {
    let Some(published) = case.get("published").and_then(Value::as_array) else {
        return BTreeSet::new();
    };
    let mut channels: BTreeSet<String> = published
        .iter()
        .map(|message| message[0].as_str().expect("a channel").to_owned())
        .collect();
    let first_key = case["keys"][0].as_str().expect("a key");
    let prefix = &first_key[..first_key.find('{').unwrap_or(0)];
    let words = case["setup"]
        .as_array()
        .expect("setup")
        .iter()
        .flat_map(strings)
        .chain(strings(&case["args"]));
    for word in words {
        let waiter_id = word.len() > 33
            && word.as_bytes()[32] == b':'
            && word[..32].bytes().all(|b| b.is_ascii_hexdigit());
        if waiter_id {
            channels.insert(format!("{prefix}wake:{}", &word[..32]));
        }
    }
    channels
}

/// Runs a case (setup, script) on PostgreSQL from empty tables, listening
/// on the channels its messages may go to ([`channels_to_hear`]); an error
/// if any member outlived its key.
fn run_on_postgres(node: &PostgresNode, case: &Value) -> Result<PostgresRun, String> {
    // PUBLISH is NOTIFY on a name derived from the channel. LISTEN takes
    // effect at commit, so it goes in a transaction of its own; the session
    // then hears its own notifications, which psql prints after the rows.
    let mut channels = BTreeMap::new();
    for channel in channels_to_hear(case) {
        let name = node.sql(&format!("SELECT {SCHEMA}.notify_channel({})", quote(&channel)));
        channels.insert(name, channel);
    }
    let mut sql = String::new();
    if !channels.is_empty() {
        sql.push_str("BEGIN;\n");
        for name in channels.keys() {
            sql.push_str(&format!("LISTEN \"{name}\";\n"));
        }
        sql.push_str("COMMIT;\n");
    }
    sql.push_str(&format!(
        "TRUNCATE {SCHEMA}.keys, {SCHEMA}.zset_members, {SCHEMA}.set_members, {SCHEMA}.hash_fields;\n"
    ));
    let setup = case["setup"].as_array().expect("setup");
    if !setup.is_empty() {
        sql.push_str("DO $setup$ BEGIN\n");
        for command in setup {
            let words = strings(command);
            let args: Vec<String> = words[1..].iter().map(|word| quote(word)).collect();
            sql.push_str(&format!(
                "  PERFORM {SCHEMA}.{}({});\n",
                words[0].to_lowercase(),
                args.join(", ")
            ));
        }
        sql.push_str("END $setup$;\n");
    }
    sql.push_str(&format!(
        "SELECT {SCHEMA}.script({}, {}, {});\n{};\n{};",
        quote(case["script"].as_str().expect("script")),
        text_array(&strings(&case["keys"])),
        text_array(&strings(&case["args"])),
        dump_sql(SCHEMA),
        ORPHANS_SQL.replace("__SCHEMA__", SCHEMA)
    ));
    let output = node.try_sql(&sql)?;
    let (notices, rows): (Vec<&str>, Vec<&str>) = output
        .lines()
        .partition(|line| line.starts_with("Asynchronous notification "));
    let mut lines = rows.into_iter();
    let reply = serde_json::from_str(lines.next().unwrap_or_default()).map_err(|e| e.to_string())?;
    let state = serde_json::from_str(lines.next().unwrap_or_default()).map_err(|e| e.to_string())?;
    let orphans = lines.next().unwrap_or_default();
    if orphans != "0" {
        return Err(format!("{orphans} members outlived their key"));
    }
    let published = notices
        .into_iter()
        .map(|notice| notification(notice, &channels))
        .collect::<Result<_, _>>()?;
    Ok(PostgresRun {
        reply,
        state,
        published,
    })
}

/// `[channel, message]` of a notification as psql prints it:
/// `Asynchronous notification "<name>" with payload "<message>" received
/// from server process with PID <pid>.`
fn notification(notice: &str, channels: &BTreeMap<String, String>) -> Result<Value, String> {
    let unreadable = || format!("unreadable notification {notice:?}");
    let rest = notice
        .strip_prefix("Asynchronous notification \"")
        .ok_or_else(unreadable)?;
    let (name, rest) = rest.split_once("\" with payload \"").ok_or_else(unreadable)?;
    let (message, _) = rest
        .rsplit_once("\" received from server process")
        .ok_or_else(unreadable)?;
    let channel = channels.get(name).ok_or_else(unreadable)?;
    Ok(json!([channel, message]))
}

fn as_json(value: &redis::Value) -> Value {
    match value {
        redis::Value::Nil => Value::Null,
        redis::Value::Int(n) => (*n).into(),
        redis::Value::BulkString(bytes) => String::from_utf8_lossy(bytes).into(),
        redis::Value::Array(items) => items.iter().map(as_json).collect(),
        other => panic!("unexpected reply {other:?}"),
    }
}

/// Runs a case on Redis with the protocol's Lua: the reply (or the error) and the keys after,
/// dumped as [`dump_sql`] dumps them.
fn run_on_redis(
    connection: &mut redis::Connection,
    source: &str,
    case: &Value,
) -> (Result<Value, String>, Value) {
    let _: () = redis::cmd("FLUSHALL").query(connection).expect("FLUSHALL");
    for command in case["setup"].as_array().expect("setup") {
        let words = strings(command);
        let _: redis::Value = redis::cmd(&words[0])
            .arg(&words[1..])
            .query(connection)
            .expect("setup command");
    }
    let (keys, args) = (strings(&case["keys"]), strings(&case["args"]));
    let reply = redis::cmd("EVAL")
        .arg(source)
        .arg(keys.len())
        .arg(&keys)
        .arg(&args)
        .query::<redis::Value>(connection)
        .map(|reply| as_json(&reply))
        .map_err(|e| e.to_string());
    let mut state = serde_json::Map::new();
    let names: Vec<String> = redis::cmd("KEYS").arg("*").query(connection).expect("KEYS");
    for key in names {
        let kind: String = redis::cmd("TYPE").arg(&key).query(connection).expect("TYPE");
        let value = match kind.as_str() {
            "string" => Value::String(redis::cmd("GET").arg(&key).query(connection).expect("GET")),
            "zset" => {
                let flat: Vec<String> = redis::cmd("ZRANGE")
                    .arg(&key)
                    .arg(0)
                    .arg(-1)
                    .arg("WITHSCORES")
                    .query(connection)
                    .expect("ZRANGE");
                flat.chunks(2).map(|pair| json!([pair[0], pair[1]])).collect()
            }
            "set" => {
                let mut members: Vec<String> = redis::cmd("SMEMBERS")
                    .arg(&key)
                    .query(connection)
                    .expect("SMEMBERS");
                members.sort();
                json!(members)
            }
            "hash" => {
                let fields: BTreeMap<String, String> = redis::cmd("HGETALL")
                    .arg(&key)
                    .query(connection)
                    .expect("HGETALL");
                json!(fields)
            }
            other => panic!("unexpected key type {other}"),
        };
        let pttl: i64 = redis::cmd("PTTL").arg(&key).query(connection).expect("PTTL");
        state.insert(key, json!({"kind": kind, "value": value, "pttl": pttl}));
    }
    (reply, Value::Object(state))
}

/// Whether two dumps agree. Times differ by the moments the two servers ran the case: a
/// remaining ttl may differ by up to a second, and so may a zset score that is a time (a waiter's
/// lease end, above 10^12 ms); everything else must be equal.
fn same_state(postgres: &Value, redis: &Value) -> Result<(), String> {
    let (postgres, redis) = (postgres.as_object().unwrap(), redis.as_object().unwrap());
    let names = |map: &serde_json::Map<String, Value>| {
        let mut names: Vec<String> = map.keys().cloned().collect();
        names.sort();
        names
    };
    if names(postgres) != names(redis) {
        return Err(format!("keys {:?} against {:?}", names(postgres), names(redis)));
    }
    let close = |a: f64, b: f64| a == b || (a >= 1e12 && b >= 1e12 && (a - b).abs() <= 1000.0);
    for (key, ours) in postgres {
        let theirs = &redis[key];
        if ours["kind"] != theirs["kind"] {
            return Err(format!("{key}: kind {} against {}", ours["kind"], theirs["kind"]));
        }
        let (a, b) = (ours["pttl"].as_i64().unwrap(), theirs["pttl"].as_i64().unwrap());
        if (a < 0 || b < 0) && a != b || (a - b).abs() > 1000 {
            return Err(format!("{key}: pttl {a} against {b}"));
        }
        if ours["kind"] == "zset" {
            let (xs, ys) = (
                ours["value"].as_array().unwrap(),
                theirs["value"].as_array().unwrap(),
            );
            let score = |pair: &Value| pair[1].as_str().unwrap().parse::<f64>().unwrap();
            let agree = xs.len() == ys.len()
                && xs
                    .iter()
                    .zip(ys)
                    .all(|(x, y)| x[0] == y[0] && close(score(x), score(y)));
            if !agree {
                return Err(format!(
                    "{key}: members {} against {}",
                    ours["value"], theirs["value"]
                ));
            }
        } else if ours["value"] != theirs["value"] {
            return Err(format!(
                "{key}: value {} against {}",
                ours["value"], theirs["value"]
            ));
        }
    }
    Ok(())
}

/// Cases of our own beyond the vectors, for Lua semantics the vectors do not reach; their reply
/// is whatever the Lua gives on Redis (`"error"`: both must fail).
fn extra_cases() -> Vec<Value> {
    let lock = json!(["v:{a}", "v:{a}:fence", "v:{a}:queue", "v:{a}:leases"]);
    let token = "00112233445566778899aabbccddeeff";
    let other = "ffeeddccbbaa99887766554433221100";
    let waiter = "dddddddddddddddddddddddddddddddd:7";
    let newcomer = "cccccccccccccccccccccccccccccccc:1";
    let sem = json!([
        "v:{s}:sem:permits",
        "v:{s}:sem:fence",
        "v:{s}:sem:queue",
        "v:{s}:sem:leases",
        "v:{s}:sem:0",
        "v:{s}:sem:1",
        "v:{s}:sem:2"
    ]);
    vec![
        json!({"script": "ACQUIRE", "why": "a counter past 2^53 comes back through a Lua double, rounded to even",
               "setup": [["SET", "v:{a}:fence", "9007199254740992"]], "keys": lock,
               "args": [token, "10000", "", "0", "1000", "0"]}),
        json!({"script": "ACQUIRE", "why": "tonumber takes a hexadecimal ticket",
               "setup": [["SET", "v:{a}", other]], "keys": lock,
               "args": [token, "10000", newcomer, "0x10", "1000", "0"]}),
        json!({"script": "ACQUIRE", "why": "a fractional lease is no integer for PEXPIRE: an error",
               "setup": [["SET", "v:{a}", other]], "keys": lock,
               "args": [token, "10000", newcomer, "0", "1000.5", "0"], "reply": "error"}),
        json!({"script": "ACQUIRE", "why": "fair: an expired first waiter is dropped, the live one after it blocks and is woken",
               "setup": [["ZADD", "v:{a}:queue", "1", waiter], ["ZADD", "v:{a}:leases", "1", waiter],
                         ["ZADD", "v:{a}:queue", "2", "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee:2"],
                         ["ZADD", "v:{a}:leases", "99999999999999", "eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee:2"]],
               "keys": lock, "args": [token, "10000", "", "0", "1000", "1"], "tolerant": true}),
        json!({"script": "ACQUIRE", "why": "reserved for this waiter: granted, the waiter leaves the queue",
               "setup": [["SET", "v:{a}", format!("w:{waiter}")], ["ZADD", "v:{a}:queue", "4", waiter],
                         ["ZADD", "v:{a}:leases", "99999999999999", waiter], ["SET", "v:{a}:fence", "6"]],
               "keys": lock, "args": [token, "10000", waiter, "4", "1000", "0"]}),
        json!({"script": "RELEASE", "why": "counted 0: the first waiter gets the reservation without a listener",
               "setup": [["SET", "v:{a}", token], ["ZADD", "v:{a}:queue", "1", waiter],
                         ["ZADD", "v:{a}:leases", "99999999999999", waiter]],
               "keys": ["v:{a}", "v:{a}:queue", "v:{a}:leases"], "args": [token, "200", "0"]}),
        json!({"script": "LEAVE", "why": "a leaving waiter's reservation passes to the next (counted 0)",
               "setup": [["SET", "v:{a}", format!("w:{waiter}")], ["ZADD", "v:{a}:queue", "1", waiter],
                         ["ZADD", "v:{a}:queue", "2", newcomer], ["ZADD", "v:{a}:leases", "99999999999999", newcomer],
                         ["ZADD", "v:{a}:leases", "99999999999999", waiter]],
               "keys": ["v:{a}", "v:{a}:queue", "v:{a}:leases"], "args": [waiter, "200", "0"]}),
        json!({"script": "EXTEND", "why": "ttl 0: PEXPIRE deletes the key, and the script still says 1",
               "setup": [["SET", "v:{a}", token]], "keys": ["v:{a}"], "args": [token, "0"]}),
        json!({"script": "ANNOUNCE", "why": "a multibyte resource: the name between the braces",
               "setup": [["SET", "app:{café}", token]], "keys": ["app:{café}", "app:{café}:leader"],
               "args": [token, "12", "host b:2 with spaces"]}),
        json!({"script": "LEADER", "why": "a value with spaces and a newline comes back whole",
               "setup": [["SET", "v:{a}", token],
                         ["SET", "v:{a}:leader", "9 2ab31b2b0c25d5f6cbc9e082f80ab7cd27ec6315 line one\nline two "]],
               "keys": ["v:{a}", "v:{a}:leader"], "args": []}),
        json!({"script": "LEADER", "why": "a malformed announcement: no leader",
               "setup": [["SET", "v:{a}", token], ["SET", "v:{a}:leader", "x 2ab3 host"]],
               "keys": ["v:{a}", "v:{a}:leader"], "args": []}),
        json!({"script": "SEM_ACQUIRE", "why": "two slots reserved for the waiter: the first is taken, the other handed on (counted 0)",
               "setup": [["SET", "v:{s}:sem:0", other], ["SET", "v:{s}:sem:1", format!("w:{waiter}")],
                         ["SET", "v:{s}:sem:2", format!("w:{waiter}")], ["ZADD", "v:{s}:sem:queue", "1", waiter],
                         ["ZADD", "v:{s}:sem:queue", "2", newcomer],
                         ["ZADD", "v:{s}:sem:leases", "99999999999999", waiter],
                         ["ZADD", "v:{s}:sem:leases", "99999999999999", newcomer]],
               "keys": sem, "args": [token, "10000", waiter, "1", "1000", "0", "3", "200", "0"]}),
        json!({"script": "SEM_ACQUIRE", "why": "every slot held without expiry: the first in line gets retry_in -1",
               "setup": [["SET", "v:{s}:sem:0", other], ["SET", "v:{s}:sem:1", other], ["SET", "v:{s}:sem:2", other]],
               "keys": sem, "args": [token, "10000", newcomer, "0", "1000", "0", "3", "200", "1"]}),
        json!({"script": "SEM_LEAVE", "why": "two reservations for the leaving waiter are passed on (counted 0)",
               "setup": [["SET", "v:{s}:sem:0", format!("w:{waiter}")], ["SET", "v:{s}:sem:2", format!("w:{waiter}")],
                         ["ZADD", "v:{s}:sem:queue", "1", waiter], ["ZADD", "v:{s}:sem:queue", "2", newcomer],
                         ["ZADD", "v:{s}:sem:leases", "99999999999999", newcomer]],
               "keys": ["v:{s}:sem:queue", "v:{s}:sem:leases", "v:{s}:sem:0", "v:{s}:sem:1", "v:{s}:sem:2"],
               "args": [waiter, "200", "0"]}),
        // (Only dead readers: SMEMBERS has no order in Redis, so which dead readers a live one
        // leaves in the set for later is unspecified.)
        json!({"script": "WRITE_ACQUIRE", "why": "every listed reader is dead: all dropped, the set goes, granted",
               "setup": [["SADD", "v:{d}:rw:readers", "v:{d}:rw:read:aa", "v:{d}:rw:read:bb"],
                         ["ZADD", "v:{d}:rw:writers", "3", newcomer]],
               "keys": ["v:{d}:rw:write", "v:{d}:rw:fence", "v:{d}:rw:queue", "v:{d}:rw:leases", "v:{d}:rw:readers", "v:{d}:rw:writers"],
               "args": [token, "10000", newcomer, "3", "1000", "0"]}),
        json!({"script": "WRITE_ACQUIRE", "why": "a live reader (no expiry) blocks: the writer queues behind the first and is listed",
               "setup": [["SET", "v:{d}:rw:read:bb", other], ["SADD", "v:{d}:rw:readers", "v:{d}:rw:read:bb"],
                         ["ZADD", "v:{d}:rw:queue", "1", waiter], ["ZADD", "v:{d}:rw:leases", "99999999999999", waiter]],
               "keys": ["v:{d}:rw:write", "v:{d}:rw:fence", "v:{d}:rw:queue", "v:{d}:rw:leases", "v:{d}:rw:readers", "v:{d}:rw:writers"],
               "args": [token, "10000", newcomer, "5", "1000", "0"]}),
        json!({"script": "READ_ACQUIRE", "why": "a live writer queued ahead blocks a reader (default mode)",
               "setup": [["ZADD", "v:{d}:rw:queue", "1", waiter], ["ZADD", "v:{d}:rw:leases", "99999999999999", waiter],
                         ["ZADD", "v:{d}:rw:writers", "1", waiter]],
               "keys": ["v:{d}:rw:write", "v:{d}:rw:fence", "v:{d}:rw:queue", "v:{d}:rw:leases", "v:{d}:rw:readers", "v:{d}:rw:writers",
                        "v:{d}:rw:read:aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa"],
               "args": [token, "10000", "", "0", "1000", "0"], "tolerant": true}),
        json!({"script": "READ_RELEASE", "why": "the last reader leaves: the write key is handed to the first waiter (counted 0)",
               "setup": [["SET", "v:{d}:rw:read:aa", token], ["SADD", "v:{d}:rw:readers", "v:{d}:rw:read:aa"],
                         ["ZADD", "v:{d}:rw:queue", "1", waiter], ["ZADD", "v:{d}:rw:leases", "99999999999999", waiter]],
               "keys": ["v:{d}:rw:read:aa", "v:{d}:rw:write", "v:{d}:rw:queue", "v:{d}:rw:leases", "v:{d}:rw:readers"],
               "args": [token, "200", "0"]}),
        json!({"script": "FENCED_SET", "why": "a larger token of a longer decimal, holder replaced",
               "setup": [["HSET", "v:data", "fence", "99", "holder", "5", "value", "x"]], "keys": ["v:data"],
               "args": ["100", "6", "new"]}),
    ]
}

/// Replies of the two servers agree; a `tolerant` case's reply holds a time (a retry_in from a
/// lease end), compared within a second.
fn same_reply(postgres: &Value, redis: &Value, tolerant: bool) -> bool {
    match (postgres, redis) {
        (Value::Array(xs), Value::Array(ys)) if tolerant => {
            xs.len() == ys.len()
                && xs.iter().zip(ys).all(|(x, y)| match (x.as_i64(), y.as_i64()) {
                    (Some(a), Some(b)) => (a - b).abs() <= 1000,
                    _ => x == y,
                })
        }
        _ => postgres == redis,
    }
}

#[test]
fn every_script_case_gives_the_vectors_reply_and_leaves_the_keys_as_redis_does() {
    let vectors = vectors();
    let node = migrated_node();
    // Idempotent: the core may run it at every start.
    node.sql(&migration(SCHEMA));
    assert_eq!(
        node.sql(&format!("SELECT {SCHEMA}.schema_version()")),
        fencelock::PROTOCOL_VERSION.to_string()
    );

    // The Lua the document carries is the one the vectors name (checked with the SQL layer's
    // own SHA-1), and each script has its function.
    let sources = lua_sources();
    let scripts = vectors["scripts"].as_object().expect("scripts");
    assert_eq!(
        sources.len(),
        scripts.len(),
        "one Lua block per script in docs/protocol.md §3"
    );
    for (name, sha) in scripts {
        let source = sources
            .get(name)
            .unwrap_or_else(|| panic!("no Lua for {name} in docs/protocol.md"));
        assert_eq!(
            node.sql(&format!("SELECT {SCHEMA}.sha1hex({})", quote(source))),
            sha.as_str().unwrap(),
            "SHA1 of {name} as docs/protocol.md carries it"
        );
        let function = format!("{SCHEMA}.lua_{}(text[], text[])", name.to_lowercase());
        assert_eq!(
            node.sql(&format!(
                "SELECT to_regprocedure({}) IS NOT NULL",
                quote(&function)
            )),
            "t",
            "{function} exists"
        );
    }

    let redis = RedisNode::start(&NodeOptions::default());
    let mut connection = redis.connection();
    let vector_cases = vectors["script_cases"].as_array().expect("script_cases").clone();
    let extras = extra_cases();
    let mut failures = Vec::new();
    for (index, case) in vector_cases.iter().chain(&extras).enumerate() {
        let name = case["script"].as_str().unwrap();
        let origin = if index < vector_cases.len() {
            "vector"
        } else {
            "extra"
        };
        let label = format!("{origin} case {index} {name} ({})", case["why"].as_str().unwrap());
        let (redis_reply, redis_state) = run_on_redis(&mut connection, &sources[name], case);
        let postgres = run_on_postgres(&node, case);
        if case["reply"] == "error" {
            assert!(
                redis_reply.is_err(),
                "{label}: Redis should fail, gave {redis_reply:?}"
            );
            if let Ok(run) = postgres {
                failures.push(format!("{label}: PostgreSQL replied {}, Redis failed", run.reply));
            }
            continue;
        }
        let redis_reply = redis_reply.unwrap_or_else(|e| panic!("{label}: Redis failed: {e}"));
        if index < vector_cases.len() {
            assert_eq!(redis_reply, case["reply"], "{label}: the Lua on Redis");
        }
        match postgres {
            Err(error) => failures.push(format!("{label}: error {error}")),
            Ok(PostgresRun {
                reply,
                state,
                published,
            }) => {
                if let Some(expected) = case.get("published").and_then(Value::as_array)
                    && published != *expected
                {
                    failures.push(format!(
                        "{label}: published {published:?}, the vector says {expected:?}"
                    ));
                }
                if !same_reply(&reply, &redis_reply, case["tolerant"] == true) {
                    failures.push(format!("{label}: reply {reply}, Redis replies {redis_reply}"));
                }
                if let Err(difference) = same_state(&state, &redis_state) {
                    failures.push(format!(
                        "{label}: keys differ from Redis's: {difference}\n    postgres: {state}\n    redis:    {redis_state}"
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases failed:\n  {}",
        failures.len(),
        vector_cases.len() + extras.len(),
        failures.join("\n  ")
    );
}

/// Runs SQL with the test schema first in the search path.
fn in_schema(node: &PostgresNode, sql: &str) -> String {
    node.sql(&format!("SET search_path = {SCHEMA}; {sql}"))
}

fn error_in_schema(node: &PostgresNode, sql: &str) -> String {
    node.try_sql(&format!("SET search_path = {SCHEMA}; {sql}"))
        .expect_err(sql)
}

/// Members die with their key (the foreign keys' cascade) whichever way
/// the key goes: DEL, SET over it, expiry.
#[test]
fn members_die_with_their_key() {
    let node = migrated_node();
    let q = |sql: &str| in_schema(&node, sql);
    let members = || {
        q(
            "SELECT (SELECT count(*) FROM zset_members) + (SELECT count(*) FROM set_members) \
              + (SELECT count(*) FROM hash_fields)",
        )
    };
    q("SELECT zadd('z', '1', 'a', '2', 'b'); SELECT sadd('s', 'x', 'y'); SELECT hset('h', 'f', 'v')");
    assert_eq!(members(), "5");
    assert_eq!(q("SELECT del('z')"), "1");
    assert_eq!(members(), "3", "DEL takes the zset's members");
    assert_eq!(q("SELECT set('s', 'now a string')"), "OK");
    assert_eq!(members(), "1", "SET over a set takes its members");
    q("SELECT pexpire('h', '10')");
    std::thread::sleep(Duration::from_millis(30));
    assert_eq!(q("SELECT hget('h', 'f') IS NULL"), "t");
    assert_eq!(members(), "0", "an expired hash takes its fields when touched");
    assert_eq!(q("SELECT set('k', 'v'); SELECT del('k')"), "OK\n1");
}

/// The entry point fixes its search_path, so objects in the caller's schema
/// cannot stand in for the internal functions and tables it calls.
#[test]
fn a_callers_search_path_cannot_stand_in_for_the_internals() {
    let node = migrated_node();
    node.sql(
        "CREATE TABLE public.keys (key text, kind text, value text, expires_at timestamptz); \
         CREATE FUNCTION public.get(k text) RETURNS text LANGUAGE sql AS $$ SELECT 'hijacked' $$;",
    );
    let reply = node.sql(&format!(
        "SET search_path = public; \
         SELECT {SCHEMA}.script('fenced_set', ARRAY['d'], ARRAY['5', '0', 'value']); \
         SELECT {SCHEMA}.script('fenced_get', ARRAY['d'], ARRAY[]::text[])"
    ));
    assert_eq!(reply, "1\n[\"value\", \"5\"]");
    assert_eq!(node.sql("SELECT count(*) FROM public.keys"), "0");
}

#[test]
fn expiry_is_lazy_and_by_the_servers_clock() {
    let node = migrated_node();
    let q = |sql: &str| in_schema(&node, sql);

    // In one statement list, so no process start falls between SET and PTTL.
    let left: i64 = q("SELECT set('k', 'v', 'PX', '50'); SELECT pttl('k')")
        .lines()
        .last()
        .unwrap()
        .parse()
        .unwrap();
    assert!((40..=50).contains(&left), "pttl right after PX 50: {left}");
    std::thread::sleep(Duration::from_millis(100));
    assert_eq!(
        q("SELECT count(*) FROM keys WHERE key = 'k'"),
        "1",
        "not deleted until touched"
    );
    assert_eq!(q("SELECT get('k') IS NULL, pttl('k'), \"exists\"('k')"), "t|-2|0");
    assert_eq!(
        q("SELECT count(*) FROM keys WHERE key = 'k'"),
        "0",
        "deleted once touched"
    );

    // An expired zset behaves as absent and takes its members with it.
    q("SELECT zadd('z', '1', 'a'); SELECT pexpire('z', '20')");
    std::thread::sleep(Duration::from_millis(50));
    assert_eq!(
        q("SELECT zrange('z', '0', '-1'), zcount('z', '-inf', '+inf')"),
        "{}|0"
    );
    assert_eq!(q("SELECT count(*) FROM zset_members WHERE key = 'z'"), "0");
    assert_eq!(
        q("SELECT zadd('z', '2', 'b'); SELECT zrange('z', '0', '-1')"),
        "1\n{b}"
    );

    // PTTL: -2 absent, -1 without expiry, else the milliseconds left.
    assert_eq!(
        q("SELECT set('p', 'v'); SELECT pttl('p'), pttl('none')"),
        "OK\n-1|-2"
    );
    let left: i64 = q("SELECT set('p', 'v', 'PX', '10000'); SELECT pttl('p')")
        .lines()
        .last()
        .unwrap()
        .parse()
        .unwrap();
    assert!((9990..=10000).contains(&left), "pttl after PX 10000: {left}");
    assert_eq!(
        q("SELECT set('p', 'w'); SELECT pttl('p')"),
        "OK\n-1",
        "SET drops the expiry"
    );
    assert_eq!(q("SELECT pexpire('p', '5000'), pexpire('none', '5000')"), "1|0");
    let left: i64 = q("SELECT pttl('p')").parse().unwrap();
    assert!((4900..=5000).contains(&left), "pttl after PEXPIRE 5000: {left}");
    assert_eq!(
        q("SELECT pexpire('p', '0'); SELECT \"exists\"('p')"),
        "1\n0",
        "a time not in the future deletes"
    );
    assert!(error_in_schema(&node, "SELECT set('p', 'v', 'PX', '0')").contains("invalid expire time"));
    assert!(error_in_schema(&node, "SELECT pexpire('p', '1.5')").contains("not an integer"));

    // The server's clock: TIME against clock_timestamp().
    let skew: f64 = q(
        "SELECT abs(t[1]::numeric + t[2]::numeric / 1e6 - extract(epoch FROM clock_timestamp()))
                       FROM (SELECT \"time\"() AS t) s",
    )
    .parse()
    .unwrap();
    assert!(skew < 1.0, "TIME is {skew} s off the server clock");

    // Inside a script the clock is read once; the freeze ends with the script.
    assert_eq!(
        q("SELECT script('extend', ARRAY['x'], ARRAY['t', '100']);
           SELECT coalesce(current_setting('fencelock.script_clock', true), '') = ''"),
        "-1\nt"
    );
}

#[test]
fn primitives_follow_redis() {
    let node = migrated_node();
    let q = |sql: &str| in_schema(&node, sql);
    let error = |sql: &str| error_in_schema(&node, sql);

    // Strings and INCR.
    assert_eq!(q("SELECT incr('c'), incr('c'), get('c')"), "1|2|2");
    assert_eq!(
        q("SELECT set('c', '41', 'PX', '10000'); SELECT incr('c'), pttl('c') > 0"),
        "OK\n42|t",
        "INCR keeps the expiry"
    );
    assert!(error("SELECT set('c', '01'); SELECT incr('c')").contains("not an integer or out of range"));
    assert!(error("SELECT set('c', 'x'); SELECT incr('c')").contains("not an integer or out of range"));
    assert!(error("SELECT set('c', '9223372036854775807'); SELECT incr('c')").contains("overflow"));
    assert_eq!(q("SELECT set('c', '-5'); SELECT incr('c')"), "OK\n-4");
    assert!(error("SELECT set('c', 'v', 'XX')").contains("syntax error"));

    // Kinds: WRONGTYPE, except for MGET (nil) and SET (replaces).
    q("SELECT zadd('z', '1', 'a')");
    for sql in [
        "SELECT get('z')",
        "SELECT incr('z')",
        "SELECT sadd('z', 'x')",
        "SELECT hget('z', 'f')",
    ] {
        assert!(error(sql).contains("WRONGTYPE"), "{sql}");
    }
    q("SELECT set('s', 'v')");
    assert!(error("SELECT zscore('s', 'a')").contains("WRONGTYPE"));
    assert_eq!(q("SELECT mget('z', 's', 'none')"), "{NULL,v,NULL}");
    assert_eq!(
        q(
            "SELECT set('z', 'now a string'); SELECT get('z'), (SELECT count(*) FROM zset_members WHERE key = 'z')"
        ),
        "OK\nnow a string|0"
    );

    // Sorted sets: order by score then member bytes, ranges by rank and by score.
    assert_eq!(
        q("SELECT zadd('r', '1', 'a', '2', 'c', '2', 'b', '3', 'd', '-inf', 'lo', '+inf', 'hi')"),
        "6"
    );
    assert_eq!(q("SELECT zadd('r', '2', 'b')"), "0", "an update adds nothing");
    let range =
        |min: &str, max: &str, limit: &str| q(&format!("SELECT zrangebyscore('r', '{min}', '{max}'{limit})"));
    assert_eq!(range("-inf", "+inf", ""), "{lo,a,b,c,d,hi}");
    assert_eq!(range("2", "2", ""), "{b,c}");
    assert_eq!(range("(2", "3", ""), "{d}");
    assert_eq!(range("(1", "(3", ""), "{b,c}");
    assert_eq!(range("-inf", "(2", ""), "{lo,a}");
    assert_eq!(range("(3", "+inf", ""), "{hi}");
    assert_eq!(range("-inf", "-inf", ""), "{lo}");
    assert_eq!(range("3", "2", ""), "{}");
    assert_eq!(range("-inf", "+inf", ", 'LIMIT', '1', '2'"), "{a,b}");
    assert_eq!(
        range("-inf", "+inf", ", 'LIMIT', '4', '-1'"),
        "{d,hi}",
        "a negative count: no limit"
    );
    assert_eq!(
        range("-inf", "+inf", ", 'LIMIT', '-1', '2'"),
        "{}",
        "a negative offset: none"
    );
    assert_eq!(range("-inf", "+inf", ", 'LIMIT', '0', '0'"), "{}");
    assert_eq!(range("1.5", "2.5e0", ""), "{b,c}");
    assert!(error("SELECT zrangebyscore('r', 'x', '1')").contains("not a float"));
    assert!(error("SELECT zrangebyscore('r', '(', '1')").contains("not a float"));
    assert!(error("SELECT zrangebyscore('r', 'nan', '1')").contains("not a float"));
    assert_eq!(
        q("SELECT zcount('r', '(1', '3'), zcount('r', '-inf', '+inf')"),
        "3|6"
    );
    assert_eq!(q("SELECT zrange('r', '0', '0', 'WITHSCORES')"), "{lo,-inf}");
    assert_eq!(q("SELECT zrange('r', '-1', '-1', 'WITHSCORES')"), "{hi,inf}");
    assert_eq!(q("SELECT zrange('r', '-2', '-1')"), "{d,hi}");
    assert_eq!(q("SELECT zrange('r', '1', '-5')"), "{a}");
    assert_eq!(
        q("SELECT zrange('r', '5', '100'), zrange('r', '6', '7'), zrange('r', '-100', '0')"),
        "{hi}|{}|{lo}"
    );
    assert_eq!(
        q("SELECT zrank('r', 'c'), zrank('r', 'none') IS NULL, zscore('r', 'b'), zscore('r', 'hi')"),
        "3|t|2|inf"
    );
    assert_eq!(
        q("SELECT zadd('f', '1.5', 'x', '1e15', 'y'); SELECT zscore('f', 'x'), zscore('f', 'y')"),
        "2\n1.5|1000000000000000"
    );
    assert!(error("SELECT zadd('f', 'nan', 'x')").contains("not a valid float"));
    assert_eq!(
        q(
            "SELECT zrem('r', 'a', 'b', 'c', 'd', 'lo', 'hi', 'none'); SELECT \"exists\"('r'), (SELECT count(*) FROM keys WHERE key = 'r')"
        ),
        "6\n0|0",
        "the last member gone, the key goes"
    );

    // Sets and hashes.
    assert_eq!(
        q("SELECT sadd('s2', 'b', 'a', 'b'); SELECT smembers('s2')"),
        "2\n{a,b}"
    );
    assert_eq!(
        q("SELECT srem('s2', 'a', 'x'), srem('s2', 'b'); SELECT \"exists\"('s2')"),
        "1|1\n0"
    );
    assert_eq!(q("SELECT smembers('none'), srem('none', 'a')"), "{}|0");
    assert_eq!(
        q("SELECT hset('h', 'f', '1', 'g', '2'), hset('h', 'f', '3')"),
        "2|0"
    );
    assert_eq!(
        q("SELECT hmget('h', 'f', 'x', 'g'), hget('h', 'f'), hmget('none', 'a', 'b')"),
        "{3,NULL,2}|3|{NULL,NULL}"
    );

    // DEL and EXISTS count keys (EXISTS counts a key named twice twice).
    assert_eq!(
        q("SELECT \"exists\"('h', 'h', 'none'), del('h', 'none', 'c'), \"exists\"('h')"),
        "2|2|0"
    );

    // Lua's semantics where the port needs them.
    assert_eq!(
        q(
            "SELECT tonumber(' 5 '), tonumber('0x10'), tonumber('-0X1f'), tonumber('1e3'), tonumber('abc') IS NULL, tonumber('') IS NULL"
        ),
        "5|16|-31|1000|t|t"
    );
    assert_eq!(
        q(
            "SELECT decimal_less('9', '10'), decimal_less('10', '9'), decimal_less('9007199254740993', '9007199254740992'), decimal_less('5', '5')"
        ),
        "t|f|f|f"
    );
    assert_eq!(
        q("SELECT lua_tostring(12345), lua_tostring(1e14), lua_tostring(0.1), fmt_d(2.7), fmt_d(-2.7)"),
        "12345|1e+14|0.1|2|-2"
    );
    assert_eq!(
        q("SELECT lua_integer(9007199254740993::bigint::double precision)"),
        "9007199254740992"
    );
    assert_eq!(
        q("SELECT sha1hex(''), sha1hex('abc')"),
        "da39a3ee5e6b4b0d3255bfef95601890afd80709|a9993e364706816aba3e25717850c26c9cd0d89d"
    );

    // Scripts check their arguments; an unknown one is NOSCRIPT.
    assert!(
        error("SELECT script('extend', ARRAY['x'], ARRAY['t'])")
            .contains("EXTEND takes at least 1 keys and 2 arguments")
    );
    assert!(
        error("SELECT script('acquire', ARRAY['a', 'b', 'c', NULL], ARRAY['1', '2', '3', '4', '5', '6'])")
            .contains("none NULL")
    );
    assert!(error("SELECT script('nope', ARRAY['x'], ARRAY[]::text[])").contains("NOSCRIPT"));
}

/// A `psql` child on `url`, running each command in turn (as `-c` options).
fn psql(url: &str, commands: &[&str]) -> Command {
    let mut command = Command::new(postgres_bin_dir().join("psql"));
    command
        .arg(url)
        .args(["-X", "-A", "-t", "-q", "-v", "ON_ERROR_STOP=1"]);
    for sql in commands {
        command.arg("-c").arg(sql);
    }
    command
        .env("PGCONNECT_TIMEOUT", "5")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command
}

fn wait_for(what: &str, mut check: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(Instant::now() < deadline, "timed out waiting until {what}");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn publish_counts_listeners_holding_the_channels_advisory_lock() {
    let node = migrated_node();
    let q = |sql: &str| in_schema(&node, sql);
    let waiter = "dddddddddddddddddddddddddddddddd:7";
    let channel = "v:wake:dddddddddddddddddddddddddddddddd";
    // The mapping docs/postgres-store.md gives: md5 of the channel (here
    // d22963bc72a313002e0cdb24db261e2e); NOTIFY on 'fl_' and its 32 hex digits, the
    // advisory key its first 16 hex digits as a signed 64-bit integer.
    let notify_channel = q(&format!("SELECT notify_channel({})", quote(channel)));
    assert_eq!(notify_channel, "fl_d22963bc72a313002e0cdb24db261e2e");
    let listener_key = q(&format!("SELECT listener_key({})", quote(channel)));
    assert_eq!(listener_key, (0xd22963bc72a31300_u64 as i64).to_string());
    assert_eq!(listener_key, "-3302999190671256832");
    let publish = || -> i64 {
        q(&format!("SELECT publish({}, 'ping')", quote(channel)))
            .parse()
            .unwrap()
    };
    assert_eq!(publish(), 0, "nobody listens");

    // The listener LISTENs, then holds the lock for as long as it listens (here: a sleep).
    let listen = format!("LISTEN {notify_channel}");
    let lock = format!("SELECT pg_advisory_lock_shared({listener_key})");
    let listener = psql(&node.url(), &[&listen, &lock, "SELECT pg_sleep(1.5)"])
        .spawn()
        .expect("start psql");
    wait_for("the listener holds its lock", || publish() == 1);
    // A second key is not counted for this channel.
    assert_eq!(
        q("SELECT publish('v:wake:eeeeeeeeeeeeeeeeeeeeeeeeeeeeeeee', 'x')"),
        "0"
    );

    // RELEASE with counted = 1 hands the lock to the listening waiter: a reservation for the
    // window, and a notification carrying `<waiter> <lock key>`.
    let token = "00112233445566778899aabbccddeeff";
    let release = format!(
        "SELECT set('v:{{a}}', '{token}');
         SELECT zadd('v:{{a}}:queue', '1', '{waiter}');
         SELECT zadd('v:{{a}}:leases', '99999999999999', '{waiter}');
         SELECT script('release', ARRAY['v:{{a}}', 'v:{{a}}:queue', 'v:{{a}}:leases'], ARRAY['{token}', '200', '1']);
         SELECT get('v:{{a}}'), pttl('v:{{a}}') BETWEEN 0 AND 200, zrange('v:{{a}}:queue', '0', '-1')"
    );
    let output = q(&release);
    assert_eq!(
        output.lines().rev().take(2).collect::<Vec<_>>(),
        [format!("w:{waiter}|t|{{{waiter}}}"), "1".to_owned()],
        "{output}"
    );

    let output = listener.wait_with_output().expect("psql ends");
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let heard = String::from_utf8_lossy(&output.stdout);
    assert!(
        heard.contains(&format!("\"{notify_channel}\" with payload \"{waiter} v:{{a}}\"")),
        "the listener heard: {heard}"
    );
    wait_for("the listener's session has ended", || publish() == 0);

    // Nobody listens any more: the next release skips the waiter and deletes the lock.
    let output = q(&release);
    assert_eq!(output.lines().last(), Some("|f|{}"), "{output}");

    // A message NOTIFY cannot carry (8000 bytes or more) reaches nobody.
    assert_eq!(
        q(&format!("SELECT publish({}, repeat('x', 8000))", quote(channel))),
        "0"
    );
}

/// Runs SQL as another role through its own URL.
fn as_role(node: &PostgresNode, role: &str, password: &str, sql: &str) -> Result<String, String> {
    let output = psql(&node.url_for(role, password), &[sql])
        .output()
        .expect("run psql");
    if output.status.success() {
        Ok(String::from_utf8_lossy(&output.stdout).trim_end().to_owned())
    } else {
        Err(String::from_utf8_lossy(&output.stderr).into_owned())
    }
}

#[test]
fn a_role_with_only_the_documented_privileges_migrates_and_locks() {
    let node = PostgresNode::start();
    node.sql(
        "CREATE ROLE migrator LOGIN PASSWORD 'm';
         GRANT CREATE ON DATABASE postgres TO migrator;
         CREATE ROLE app LOGIN PASSWORD 'a';
         CREATE ROLE stranger LOGIN PASSWORD 's';
         CREATE ROLE schema_owner LOGIN PASSWORD 'o';
         CREATE SCHEMA fl_given;
         GRANT USAGE, CREATE ON SCHEMA fl_given TO schema_owner",
    );

    // Migrating: CREATE on the database (the schema is created), and again as its owner.
    let migrate = migration("fl_app");
    as_role(&node, "migrator", "m", &migrate).expect("migrate with CREATE on the database");
    as_role(&node, "migrator", "m", &migrate).expect("migrate again, as the owner");
    // Or CREATE (and USAGE) on a schema made beforehand.
    as_role(&node, "schema_owner", "o", &migration("fl_given")).expect("migrate with CREATE on the schema");

    // Using: USAGE on the schema, EXECUTE on its functions, DML on its tables; nothing else
    // (EXECUTE is taken from PUBLIC first, so the grant is what counts).
    as_role(
        &node,
        "migrator",
        "m",
        "REVOKE EXECUTE ON ALL FUNCTIONS IN SCHEMA fl_app FROM PUBLIC;
         GRANT USAGE ON SCHEMA fl_app TO app;
         GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA fl_app TO app;
         GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA fl_app TO app",
    )
    .expect("grant");
    let lock = "ARRAY['p:{r}', 'p:{r}:fence', 'p:{r}:queue', 'p:{r}:leases']";
    let waiter = "cccccccccccccccccccccccccccccccc:1";
    let session = format!(
        "SELECT fl_app.script('acquire', {lock}, ARRAY['t1', '10000', '', '0', '1000', '0']);
         SELECT fl_app.script('acquire', {lock}, ARRAY['t2', '10000', '{waiter}', '0', '1000', '0']);
         SELECT fl_app.script('status', ARRAY['p:{{r}}', 'p:{{r}}:fence', 'p:{{r}}:leases'], ARRAY[]::text[])->>3;
         SELECT fl_app.script('release', ARRAY['p:{{r}}', 'p:{{r}}:queue', 'p:{{r}}:leases'], ARRAY['t1', '200', '1']);
         SELECT fl_app.script('fenced_set', ARRAY['p:data'], ARRAY['1', '5', 'v']);
         SELECT fl_app.script('fenced_get', ARRAY['p:data'], ARRAY[]::text[]);
         SELECT fl_app.set('p:short', 'v', 'PX', '1'); SELECT pg_sleep(0.01);
         SELECT fl_app.get('p:short') IS NULL;"
    );
    let output = as_role(&node, "app", "a", &session).expect("the application's calls");
    let lines: Vec<&str> = output.lines().collect();
    assert_eq!(lines.len(), 9, "{output}");
    assert_eq!(lines[0], "1", "granted: {output}");
    assert!(
        lines[1].starts_with("[0, 99") && lines[1].ends_with(", 1, 0]"),
        "refused, queued first with ticket 1: {output}"
    );
    assert_eq!(lines[2], "1", "STATUS counts the waiter: {output}");
    assert_eq!(lines[3], "1", "released (the waiter does not listen): {output}");
    assert_eq!(
        lines[4..6],
        ["1", "[\"v\", \"1\"]"],
        "fenced write and read: {output}"
    );
    assert_eq!(lines[8], "t", "an expired key is deleted lazily: {output}");
    assert!(
        as_role(&node, "app", "a", &migrate).is_err(),
        "the application cannot migrate"
    );
    assert!(
        as_role(&node, "app", "a", "TRUNCATE fl_app.keys").is_err(),
        "nor truncate"
    );
    let refused = as_role(
        &node,
        "stranger",
        "s",
        &format!("SELECT fl_app.script('acquire', {lock}, ARRAY['t3', '10000', '', '0', '1000', '0'])"),
    )
    .expect_err("a role without the grants");
    assert!(refused.contains("permission denied"), "{refused}");
}

/// The client's prepared script call is guarded by its marker (core's
/// `prepared_call`): bound with another marker, as when a pooler hands our
/// statement's name to a session where another client prepared it, it
/// answers no row and runs nothing.
#[test]
fn a_guarded_call_with_another_marker_runs_nothing() {
    let node = migrated_node();
    let call = |marker: &str| {
        node.sql(&format!(
            "PREPARE guarded(text, text[], text[], text) AS \
               SELECT {SCHEMA}.script($1, $2, $3) WHERE $4::text = 'ours'; \
             EXECUTE guarded('fenced_set', ARRAY['d'], ARRAY['5', '0', 'v'], '{marker}'); \
             SELECT count(*) FROM {SCHEMA}.keys WHERE key = 'd'"
        ))
    };
    assert_eq!(call("theirs"), "0", "another marker: no row, nothing written");
    assert_eq!(call("ours"), "1\n1", "our marker: the script ran and wrote");
}
