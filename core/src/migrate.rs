//! Installing the PostgreSQL store's schema ([`Client::migrate`],
//! `fencelock migrate`): the tables and functions of
//! `core/sql/fencelock.sql` (docs/postgres-store.md).

use crate::client::Client;
use crate::error::{Error, Result};
use crate::runtime;

impl Client {
    /// Installs or upgrades fencelock's tables and functions on a
    /// PostgreSQL node (docs/postgres-store.md), with the privileges of the
    /// URL's role (`CREATE` on the database or the schema). A client also
    /// installs them on first use when they are missing; this replaces
    /// them too, for an upgrade. Returns how many nodes were migrated: 0
    /// for Redis nodes, which have nothing to install.
    pub async fn migrate(&self) -> Result<usize> {
        let shared = self.shared().clone();
        runtime::run(async move {
            let mut migrated = 0;
            for node in shared.nodes.nodes() {
                match node.migrate().await {
                    None => {}
                    Some(Ok(())) => migrated += 1,
                    Some(Err(failure)) => {
                        return Err(Error::new(
                            failure.kind,
                            format!("migrating {} failed: {}", node.endpoint(), failure.detail),
                        ));
                    }
                }
            }
            Ok(migrated)
        })
        .await?
    }
}
