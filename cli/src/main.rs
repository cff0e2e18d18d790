//! `fencelock`: run a command while holding a distributed lock over Redis
//! or while leading an election, follow an election, or look at locks. See `fencelock --help` for the exit codes.

mod args;
mod child;
mod connect;
mod elect;
mod exit;
mod inspect;
mod metrics_endpoint;
mod migrate;
mod run;
mod signals;
mod terminal;
mod top;

use std::process::ExitCode;
use std::time::Duration;

use clap::parser::ValueSource;
use clap::{ArgMatches, CommandFactory, FromArgMatches};
use tracing_subscriber::EnvFilter;

use crate::args::{Cli, Command};

fn main() -> ExitCode {
    let matches = Cli::command().get_matches();
    let cli = Cli::from_arg_matches(&matches).unwrap_or_else(|e| e.exit());
    warn_about_passwords_in_argv(&matches, &cli);
    init_logging(cli.verbose);
    let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(e) => {
            eprintln!("fencelock: cannot start: {e}");
            return ExitCode::from(exit::SOFTWARE);
        }
    };
    runtime.block_on(dispatch(cli))
}

async fn dispatch(cli: Cli) -> ExitCode {
    // Before the client exists: it registers its metrics with the recorder
    // installed when it is built.
    if let Command::Run(args) = &cli.command
        && let Some(addr) = &args.metrics_addr
    {
        match metrics_endpoint::serve(addr) {
            Ok(bound) => eprintln!("fencelock: metrics on http://{bound}/metrics"),
            Err(e) => {
                eprintln!("fencelock: {e}");
                return ExitCode::from(exit::USAGE);
            }
        }
    }
    let client = match connect::connect(&cli.connection).await {
        Ok(client) => client,
        Err(e) => {
            eprintln!("fencelock: {e}");
            return exit::for_error(e.kind());
        }
    };
    let code = match &cli.command {
        Command::Run(args) => run::run(&client, args).await,
        Command::Elect(args) => elect::elect(&client, args).await,
        Command::Observe(args) => elect::observe(&client, args).await,
        Command::Inspect(args) => inspect::inspect(&client, args).await,
        Command::Top(args) => top::top(&client, args).await,
        Command::Migrate => migrate::migrate(&client).await,
    };
    settle(&client, cli.connection.node_timeout).await;
    code
}

/// Waits until the undo of every abandoned acquire attempt (cancelled by a
/// signal, or refused by a majority) has run: it runs in the background and
/// would die with the process, leaving the attempt's key to block the lock
/// until its ttl. Each undo is bounded by the node timeout; the bound here is
/// only a safety net so that fencelock always exits.
async fn settle(client: &fencelock::Client, node_timeout: Duration) {
    let bound = node_timeout.saturating_mul(2) + Duration::from_secs(1);
    if tokio::time::timeout(bound, client.settle()).await.is_err() {
        tracing::warn!("an abandoned attempt was not undone everywhere; its keys expire at the ttl");
    }
}

/// The command line of every process can be read by every user of the
/// machine (`ps`, /proc/PID/cmdline), unlike its environment or a file
/// readable by its owner only: say so when a password came that way.
fn warn_about_passwords_in_argv(matches: &ArgMatches, cli: &Cli) {
    let from_argv = |id: &str| matches.value_source(id) == Some(ValueSource::CommandLine);
    let connection = &cli.connection;
    let where_ = if from_argv("password") && connection.password.is_some() {
        "--password"
    } else if from_argv("nodes") && connection.nodes.iter().any(|node| node.has_password()) {
        "a --node URL"
    } else {
        return;
    };
    eprintln!(
        "fencelock: warning: the password in {where_} is visible to other users of this machine \
         (ps, /proc/PID/cmdline); put it in a file readable only by you and pass --password-file FILE \
         (or set FENCELOCK_PASSWORD_FILE or FENCELOCK_PASSWORD) instead"
    );
}

/// Warnings by default; `-v` adds lock events, `-vv` every round trip.
/// `RUST_LOG` overrides both.
fn init_logging(verbose: u8) {
    let default = match verbose {
        0 => "warn",
        1 => "fencelock=info,fencelock_cli=info",
        _ => "fencelock=debug,fencelock_cli=debug",
    };
    let filter = EnvFilter::try_from_default_env().unwrap_or_else(|_| EnvFilter::new(default));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .with_target(false)
        .init();
}
