//! Listing locks on a PostgreSQL node: the SCAN command that `top` and
//! `Client::resources` send, answered from the key table.

use redis::{Cmd, Value};
use tokio_postgres::types::Type;

use super::call::PgConnection;
use crate::error::ErrorKind;
use crate::store::StoreError;

/// A `SCAN cursor MATCH pattern COUNT n` command: the one command besides
/// the scripts that a PostgreSQL node answers (for listing locks).
pub(super) struct ScanCall {
    /// Keys already returned, in key order.
    offset: i64,
    /// The pattern as a PostgreSQL regular expression.
    regex: String,
    count: i64,
}

impl ScanCall {
    /// `None` when `cmd` is not a SCAN.
    pub(super) fn parse(cmd: &Cmd) -> Option<std::result::Result<ScanCall, StoreError>> {
        let mut words = cmd.args_iter().map(|arg| match arg {
            redis::Arg::Simple(bytes) => bytes,
            _ => &b""[..],
        });
        if !words.next()?.eq_ignore_ascii_case(b"SCAN") {
            return None;
        }
        let number = |word: Option<&[u8]>| -> Option<i64> { std::str::from_utf8(word?).ok()?.parse().ok() };
        let words: Vec<&[u8]> = words.collect();
        let parsed = match words[..] {
            [cursor, b"MATCH", pattern, b"COUNT", count] => (|| {
                Some(ScanCall {
                    offset: number(Some(cursor))?,
                    regex: glob_to_regex(std::str::from_utf8(pattern).ok()?),
                    count: number(Some(count))?.max(1),
                })
            })(),
            _ => None,
        };
        Some(
            parsed
                .ok_or_else(|| StoreError::refused(ErrorKind::Unavailable, "not a SCAN this store answers")),
        )
    }
}

impl PgConnection {
    /// A SCAN page, as Redis replies: `[next cursor, [keys…]]`, the cursor
    /// 0 after the last page. Keys whose expiry passed are not listed.
    pub(super) async fn scan(&self, scan: ScanCall) -> std::result::Result<Value, StoreError> {
        let rows = self
            .client
            .query_typed(
                &self.list,
                &[
                    (&scan.regex, Type::TEXT),
                    (&scan.offset, Type::INT8),
                    (&scan.count, Type::INT8),
                ],
            )
            .await?;
        let next = if (rows.len() as i64) < scan.count {
            0
        } else {
            scan.offset + scan.count
        };
        let keys = rows
            .iter()
            .map(|row| Value::BulkString(row.get::<_, String>(0).into_bytes()))
            .collect();
        Ok(Value::Array(vec![
            Value::BulkString(next.to_string().into_bytes()),
            Value::Array(keys),
        ]))
    }
}

/// A Redis glob (`*`, `?`, `[…]`, `\x`) as an anchored PostgreSQL regular
/// expression that matches the same keys.
fn glob_to_regex(glob: &str) -> String {
    let mut regex = String::from("^");
    let mut chars = glob.chars();
    while let Some(c) = chars.next() {
        match c {
            '*' => regex.push_str(".*"),
            '?' => regex.push('.'),
            '\\' => push_literal(&mut regex, chars.next().unwrap_or('\\')),
            '[' => {
                regex.push('[');
                let mut first = true;
                for c in chars.by_ref() {
                    match c {
                        ']' if !first => break,
                        '^' if first => regex.push('^'),
                        '\\' => regex.push_str("\\\\"),
                        '[' => regex.push_str("\\["),
                        _ => regex.push(c),
                    }
                    first = false;
                }
                regex.push(']');
            }
            _ => push_literal(&mut regex, c),
        }
    }
    regex.push('$');
    regex
}

fn push_literal(regex: &mut String, c: char) {
    if !c.is_alphanumeric() {
        regex.push('\\');
    }
    regex.push(c);
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globs_become_anchored_regular_expressions() {
        assert_eq!(
            glob_to_regex("fencelock:{*}:fence"),
            r"^fencelock\:\{.*\}\:fence$"
        );
        assert_eq!(glob_to_regex(r"a\*b?"), r"^a\*b.$");
        assert_eq!(glob_to_regex("[^a-c]x"), "^[^a-c]x$");
        assert_eq!(glob_to_regex("[]]"), "^[]]$");
        assert_eq!(glob_to_regex("é.+"), r"^é\.\+$");
    }
}
