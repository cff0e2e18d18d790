//! `fencelock elect` (run a command only while leader) and `fencelock
//! observe` (print each new leader).

use std::process::ExitCode;

use fencelock::{CampaignOptions, Client};

use crate::args::{ElectArgs, ObserveArgs};
use crate::exit;
use crate::run::{Hold, run_holding};

/// Campaigns, runs the command while leader, resigns when it exits.
pub async fn elect(client: &Client, args: &ElectArgs) -> ExitCode {
    let mut options = CampaignOptions::new(args.ttl).value(args.value.as_bytes());
    if let Some(wait) = args.wait {
        options = options.wait(wait);
    }
    let hold = Hold {
        resource: &args.name,
        command: &args.command,
        grace: args.grace,
        what: "leadership",
        busy_hint: "another candidate leads (try a longer --wait, or none to wait until elected)",
    };
    let campaign = async {
        let leadership = client.campaign(&args.name, options).await?;
        Ok(leadership.into_lock())
    };
    run_holding(campaign, &hold).await
}

/// Prints `EPOCH VALUE` for the current leader and each new one, forever.
pub async fn observe(client: &Client, args: &ObserveArgs) -> ExitCode {
    let observation = match client.observe(&args.name) {
        Ok(observation) => observation,
        Err(e) => {
            eprintln!("fencelock: {e}");
            return exit::for_error(e.kind());
        }
    };
    while let Some(leader) = observation.next().await {
        // One line per leader: control characters in the value are escaped.
        println!(
            "{} {}",
            leader.epoch,
            String::from_utf8_lossy(&leader.value).escape_debug()
        );
    }
    eprintln!("fencelock: the observation of '{}' ended", args.name);
    ExitCode::from(exit::SOFTWARE)
}
