//! At start-up: containers other runner instances left for attempts that are dead (a runner
//! that died and will not come back under its id, or one whose attempt was superseded). The
//! coordinator decides, per attempt: a container of the run's latest attempt while its lease
//! is live belongs to a live runner and is never touched; a container of any other attempt is
//! dead, even while a newer attempt of the same run is live. A run the coordinator does not
//! know is left alone (it may be another installation's). Containers without an attempt label
//! (an older runner's) go by the run's lease.

use cairn_bus::Chain;

use crate::coordinator::{CoordinatorClient, RunStatus};
use crate::executor::{Executor, ForeignAttempt, RunnerInstance};

/// Whether the containers of `found` belong to the live attempt of `run`.
pub fn is_live(found: &ForeignAttempt, run: &RunStatus) -> bool {
    match found.attempt {
        Some(attempt) => run.lease_live && run.attempt == attempt,
        None => run.lease_live,
    }
}

/// Removes what other instances left for dead attempts; returns how many containers and
/// volumes went. Failures are logged: reaping never stops a start.
pub async fn reap_expired(
    exec: &dyn Executor,
    client: &CoordinatorClient,
    own: &RunnerInstance,
) -> usize {
    let found = match exec.foreign_attempts(own).await {
        Ok(found) => found,
        Err(e) => {
            tracing::warn!(error = %Chain(&e), "cannot list other instances' containers");
            return 0;
        }
    };
    let mut reaped = 0;
    for dead in found {
        let (instance, run_id) = (&dead.instance, &dead.run_id);
        let run = match client.get_run(&run_id.to_string()).await {
            Ok(run) => run,
            Err(e) => {
                tracing::debug!(%instance, %run_id, error = %e, "run unknown to the coordinator; its containers are left alone");
                continue;
            }
        };
        if is_live(&dead, &run) {
            continue;
        }
        match exec.reap_foreign(&dead).await {
            Ok(n) => {
                if n > 0 {
                    tracing::warn!(%instance, %run_id, attempt = ?dead.attempt, live_attempt = run.attempt, removed = n, "removed the containers of a dead attempt");
                }
                reaped += n;
            }
            Err(e) => {
                tracing::warn!(%instance, %run_id, error = %Chain(&e), "cannot remove a dead attempt's containers");
            }
        }
    }
    reaped
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;
    use crate::executor::RunId;
    use crate::pipeline::RunOutcome;

    #[test]
    fn only_the_latest_attempt_under_a_live_lease_is_live() {
        let run = |attempt, lease_live| RunStatus {
            status: "running".into(),
            attempt,
            finished: false,
            lease_live,
            outcome: RunOutcome::Failed,
            kind: None,
            base_generation: 0,
        };
        let found = |attempt| ForeignAttempt {
            instance: RunnerInstance::parse("other").unwrap(),
            run_id: RunId::new(),
            attempt,
        };
        assert!(is_live(&found(Some(2)), &run(2, true)));
        // A superseded attempt is dead while the newer one is live.
        assert!(!is_live(&found(Some(1)), &run(2, true)));
        assert!(!is_live(&found(Some(2)), &run(2, false)));
        // No attempt label: the run's lease decides, as before.
        assert!(is_live(&found(None), &run(2, true)));
        assert!(!is_live(&found(None), &run(2, false)));
    }
}
