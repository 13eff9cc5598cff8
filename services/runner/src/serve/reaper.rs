//! At start-up: containers other runner instances left for runs whose lease has expired (a
//! runner that died and will not come back under its id). The coordinator decides: a run
//! whose lease is live belongs to a live runner and is never touched; one the coordinator
//! does not know is left alone too (it may be another installation's).

use cairn_bus::Chain;

use crate::coordinator::CoordinatorClient;
use crate::executor::{Executor, RunnerInstance};

/// Removes what other instances left for runs whose lease expired or that finished; returns
/// how many containers and volumes went. Failures are logged: reaping never stops a start.
pub async fn reap_expired(
    exec: &dyn Executor,
    client: &CoordinatorClient,
    own: &RunnerInstance,
) -> usize {
    let runs = match exec.foreign_runs(own).await {
        Ok(runs) => runs,
        Err(e) => {
            tracing::warn!(error = %Chain(&e), "cannot list other instances' containers");
            return 0;
        }
    };
    let mut reaped = 0;
    for (instance, run_id) in runs {
        let run = match client.get_run(&run_id.to_string()).await {
            Ok(run) => run,
            Err(e) => {
                tracing::debug!(%instance, %run_id, error = %e, "run unknown to the coordinator; its containers are left alone");
                continue;
            }
        };
        if run.lease_live {
            continue;
        }
        match exec.reap_foreign_run(&instance, &run_id).await {
            Ok(n) => {
                if n > 0 {
                    tracing::warn!(%instance, %run_id, removed = n, "removed the containers of a run whose lease expired");
                }
                reaped += n;
            }
            Err(e) => {
                tracing::warn!(%instance, %run_id, error = %Chain(&e), "cannot remove a dead run's containers");
            }
        }
    }
    reaped
}
