//! `fencelock migrate`: installs the PostgreSQL store's schema.

use std::process::ExitCode;

use fencelock::Client;

use crate::exit;

/// Migrates every PostgreSQL node and says what it did.
pub async fn migrate(client: &Client) -> ExitCode {
    match client.migrate().await {
        Ok(0) => {
            println!("nothing to migrate: Redis nodes load fencelock's scripts when first used");
            ExitCode::SUCCESS
        }
        Ok(_) => {
            for node in client.nodes() {
                println!(
                    "{node}: fencelock's tables and functions are installed (protocol version {})",
                    fencelock::PROTOCOL_VERSION
                );
            }
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("fencelock: {e}");
            exit::for_error(e.kind())
        }
    }
}
