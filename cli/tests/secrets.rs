//! Issue #15, item 12: passwords stay out of `--help`, out of the command's
//! environment, out of messages and logs, and argv gets a warning.

mod common;

use std::time::Duration;

use common::{bare_fencelock, code, eventually, key_exists, text};
use fencelock_harness::{NodeOptions, RedisNode};

const PASSWORD: &str = "s3cret-pw-42";

/// A node where user `alice` needs [`PASSWORD`]; the default user stays
/// open, so the harness's own checks need no credentials.
fn node_with_password() -> RedisNode {
    let acl = [
        "--user",
        "alice",
        "on",
        &format!(">{PASSWORD}"),
        "~*",
        "&*",
        "+@all",
    ];
    // With AOF: fencelock then has nothing to warn about, so stderr must be
    // empty unless a password warning is due.
    RedisNode::start(&NodeOptions {
        extra_args: acl.iter().map(|s| s.to_string()).collect(),
        aof: true,
        ..NodeOptions::default()
    })
}

fn url_with_password(node: &RedisNode) -> String {
    format!("redis://alice:{PASSWORD}@127.0.0.1:{}", node.port())
}

fn assert_no_secret(what: &str, output: &str) {
    assert!(!output.contains(PASSWORD), "{what} shows the password:\n{output}");
}

/// A file in the temporary directory, removed when dropped.
struct TempFile(std::path::PathBuf);

impl TempFile {
    fn new(name: &str, content: &str) -> TempFile {
        let path = std::env::temp_dir().join(format!("fencelock-cli-{}-{name}", std::process::id()));
        std::fs::write(&path, content).expect("write a temporary file");
        TempFile(path)
    }

    fn path(&self) -> &str {
        self.0.to_str().expect("a UTF-8 temporary path")
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn help_never_shows_the_values_of_secret_variables() {
    for args in [&["--help"][..], &["run", "--help"], &["status", "--help"]] {
        let output = bare_fencelock()
            .env("FENCELOCK_NODES", format!("redis://alice:{PASSWORD}@127.0.0.1:1"))
            .env("FENCELOCK_PASSWORD", PASSWORD)
            .args(args)
            .output()
            .expect("run fencelock --help");
        assert_eq!(code(&output), 0);
        let help = text(&output.stdout);
        assert_no_secret(&format!("{args:?}"), &help);
        assert!(help.contains("FENCELOCK_NODES"), "{help}");
        assert!(help.contains("--password-file"), "{help}");
    }
}

#[test]
fn the_command_inherits_no_connection_settings() {
    let node = node_with_password();
    let password_file = TempFile::new("env-password", &format!("{PASSWORD}\n"));
    let settings = [
        ("FENCELOCK_NODES", url_with_password(&node)),
        ("FENCELOCK_USERNAME", "alice".to_owned()),
        ("FENCELOCK_PASSWORD", PASSWORD.to_owned()),
    ];
    let by_file = [
        ("FENCELOCK_NODES", format!("redis://127.0.0.1:{}", node.port())),
        ("FENCELOCK_USERNAME", "alice".to_owned()),
        ("FENCELOCK_PASSWORD_FILE", password_file.path().to_owned()),
    ];
    for environment in [&settings, &by_file] {
        let output = bare_fencelock()
            .envs(environment.iter().map(|(k, v)| (k, v)))
            .args(["run", "inherit", "--", "env"])
            .output()
            .expect("run fencelock");
        assert_eq!(code(&output), 0, "{}", text(&output.stderr));
        let env = text(&output.stdout);
        assert!(env.contains("FENCELOCK_TOKEN="), "{env}");
        for (name, _) in environment {
            assert!(
                !env.contains(&format!("{name}=")),
                "the command got {name}:\n{env}"
            );
        }
        assert_no_secret("the command's environment", &env);
        assert!(!env.contains(password_file.path()), "{env}");
    }
}

#[test]
fn a_password_in_argv_is_warned_about_and_never_echoed() {
    let node = node_with_password();
    let by_flag = [
        "--node".to_owned(),
        node.url(),
        "--username".to_owned(),
        "alice".to_owned(),
        "--password".to_owned(),
        PASSWORD.to_owned(),
    ];
    let by_url = ["--node".to_owned(), url_with_password(&node)];
    for argv in [&by_flag[..], &by_url[..]] {
        let output = bare_fencelock()
            .args(argv)
            .args(["-vv", "run", "argv", "--", "true"])
            .output()
            .expect("run fencelock");
        assert_eq!(code(&output), 0, "{}", text(&output.stderr));
        let stderr = text(&output.stderr);
        assert!(stderr.contains("warning"), "{argv:?}: no warning:\n{stderr}");
        assert!(stderr.contains("--password-file"), "{stderr}");
        assert!(stderr.contains("ps"), "{stderr}");
        assert_no_secret("stderr with -vv", &stderr);
    }
    // From the environment: nothing to warn about.
    let output = bare_fencelock()
        .env("FENCELOCK_NODES", url_with_password(&node))
        .args(["run", "argv", "--", "true"])
        .output()
        .expect("run fencelock");
    assert_eq!(code(&output), 0, "{}", text(&output.stderr));
    assert_eq!(text(&output.stderr), "");
}

#[test]
fn a_password_file_is_read_and_its_problems_are_reported() {
    let node = node_with_password();
    let run = |extra: &[&str], env: Option<&str>| {
        let mut command = bare_fencelock();
        command.args(["--node", &node.url(), "--username", "alice"]);
        if let Some(path) = env {
            command.env("FENCELOCK_PASSWORD_FILE", path);
        }
        command.args(extra).args(["run", "by-file", "--", "true"]);
        command.output().expect("run fencelock")
    };
    // The first line is the password; a CRLF ending and later lines are ignored.
    let good = TempFile::new("good", &format!("{PASSWORD}\r\nsecond line\n"));
    for output in [
        run(&["--password-file", good.path()], None),
        run(&[], Some(good.path())),
    ] {
        assert_eq!(code(&output), 0, "{}", text(&output.stderr));
        assert_eq!(text(&output.stderr), "", "no warning for a password file");
    }
    assert!(eventually(Duration::from_secs(5), || !key_exists(
        &node, "by-file"
    )));

    let missing = std::env::temp_dir().join("fencelock-cli-no-such-password-file");
    let output = run(&["--password-file", missing.to_str().unwrap()], None);
    assert_eq!(code(&output), 2, "{}", text(&output.stderr));
    let stderr = text(&output.stderr);
    assert!(
        stderr.contains("--password-file") && stderr.contains("no-such-password-file"),
        "{stderr}"
    );

    let empty = TempFile::new("empty", "\n");
    let output = run(&["--password-file", empty.path()], None);
    assert_eq!(code(&output), 2, "{}", text(&output.stderr));
    assert!(text(&output.stderr).contains("empty"), "{}", text(&output.stderr));

    // A wrong password: refused (69), and neither password is echoed.
    let wrong = TempFile::new("wrong", "not-the-password-17\n");
    let output = run(&["-vv", "--password-file", wrong.path()], None);
    assert_eq!(code(&output), 69, "{}", text(&output.stderr));
    let stderr = text(&output.stderr);
    assert!(!stderr.contains("not-the-password-17"), "{stderr}");

    // Both ways at once: a usage error rather than a silent choice.
    let output = bare_fencelock()
        .env("FENCELOCK_PASSWORD", PASSWORD)
        .args(["--node", &node.url(), "--password-file", good.path()])
        .args(["run", "both", "--", "true"])
        .output()
        .expect("run fencelock");
    assert_eq!(code(&output), 2, "{}", text(&output.stderr));
    assert_no_secret("a usage error", &text(&output.stderr));
}

#[test]
fn errors_about_credentialed_urls_never_show_the_password() {
    for url in [
        format!("redis://alice:{PASSWORD}@127.0.0.1:0"),
        format!("http://alice:{PASSWORD}@127.0.0.1:1"),
        format!("redis://alice:{PASSWORD}@127.0.0.1:1/notadb"),
    ] {
        let output = bare_fencelock()
            .args(["--node", &url, "run", "bad-url", "--", "true"])
            .output()
            .expect("run fencelock");
        assert_eq!(code(&output), 2, "{url}: {}", text(&output.stderr));
        assert_no_secret("a configuration error", &text(&output.stderr));
    }
}
