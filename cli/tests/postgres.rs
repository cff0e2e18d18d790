//! Issue 19: `fencelock` over a PostgreSQL node: `migrate` by a role that may
//! create the schema, then `run` by a role with only the documented privileges.

mod common;

use common::{bare_fencelock, code, text};
use fencelock_harness::{NodeOptions, PostgresNode, RedisNode};

#[test]
fn migrate_then_run_with_a_least_privilege_role() {
    let node = PostgresNode::start();
    let migrated = bare_fencelock()
        .args(["--node", &node.url(), "migrate"])
        .output()
        .unwrap();
    assert_eq!(code(&migrated), 0, "{}", text(&migrated.stderr));
    assert!(
        text(&migrated.stdout).contains("installed"),
        "{}",
        text(&migrated.stdout)
    );
    assert!(
        !text(&migrated.stdout).contains("harness-superuser"),
        "a password was shown"
    );

    // docs/postgres-store.md, "Privileges": what an application's role needs.
    node.sql(
        "CREATE ROLE app LOGIN PASSWORD 'app-pw';
         GRANT USAGE ON SCHEMA fencelock TO app;
         GRANT EXECUTE ON ALL FUNCTIONS IN SCHEMA fencelock TO app;
         GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA fencelock TO app;",
    );
    let app = node.url_for("app", "app-pw");
    let run = |resource: &str| {
        bare_fencelock()
            .args([
                "--node",
                &app,
                "run",
                resource,
                "--",
                "sh",
                "-c",
                "echo token=$FENCELOCK_TOKEN",
            ])
            .output()
            .unwrap()
    };
    let first = run("pg-job");
    assert_eq!(code(&first), 0, "{}", text(&first.stderr));
    let second = run("pg-job");
    let token = |output: &std::process::Output| -> u64 {
        let shown = text(&output.stdout);
        shown
            .trim()
            .strip_prefix("token=")
            .and_then(|t| t.parse().ok())
            .unwrap_or_else(|| panic!("{shown}"))
    };
    assert!(token(&second) > token(&first), "tokens rise across runs");

    // Without privileges on the schema, the error says what to grant.
    node.sql("CREATE ROLE stranger LOGIN PASSWORD 'pw'");
    let refused = bare_fencelock()
        .args([
            "--node",
            &node.url_for("stranger", "pw"),
            "run",
            "pg-job",
            "--",
            "true",
        ])
        .output()
        .unwrap();
    assert_eq!(code(&refused), 69, "{}", text(&refused.stderr));
    assert!(
        text(&refused.stderr).contains("privileges"),
        "{}",
        text(&refused.stderr)
    );
    assert!(
        !text(&refused.stderr).contains(":pw@"),
        "{}",
        text(&refused.stderr)
    );
}

#[test]
fn migrate_on_redis_has_nothing_to_do() {
    let node = RedisNode::start(&NodeOptions::default());
    let output = bare_fencelock()
        .args(["--node", &node.url(), "migrate"])
        .output()
        .unwrap();
    assert_eq!(code(&output), 0, "{}", text(&output.stderr));
    assert!(
        text(&output.stdout).contains("nothing to migrate"),
        "{}",
        text(&output.stdout)
    );
}
