//! Server streams: [`Deployments::watch_deployment`] follows a deployment's events and
//! reconnects from the last position it saw when the stream breaks, and
//! [`Recovery::verify_all`] collects a VerifyAll pass.
use std::time::Duration;

use cairn_proto::deployments::{DeploymentEvent, WatchDeploymentRequest, deployments_client};
use cairn_proto::state::{VerifyAllRequest, VerifyReportItem, recovery_client};
use futures::Stream;

use crate::client::Cairn;
use crate::endpoints::Endpoint;
use crate::error::{Error, connection_failed};
use crate::rpc::{Deployments, Recovery, Rpc};

/// Consecutive failed reconnects after which a watch gives up with the last error.
pub const WATCH_MAX_RECONNECTS: u32 = 10;

struct WatchState {
    cairn: Cairn,
    tenant_id: String,
    deployment_id: String,
    after: u64,
    stream: Option<tonic::Streaming<DeploymentEvent>>,
    failures: u32,
    done: bool,
}

impl WatchState {
    async fn open(&mut self) -> Result<tonic::Streaming<DeploymentEvent>, Error> {
        let req = self
            .cairn
            .stream_request(
                Rpc::WatchDeployment,
                WatchDeploymentRequest {
                    tenant_id: self.tenant_id.clone(),
                    deployment_id: self.deployment_id.clone(),
                    after: self.after,
                },
            )
            .await?;
        let mut client =
            deployments_client::DeploymentsClient::new(self.cairn.channel(Endpoint::Deployments)?);
        let deadline = self.cairn.options().deadline;
        match tokio::time::timeout(deadline, client.watch_deployment(req)).await {
            Ok(Ok(resp)) => Ok(resp.into_inner()),
            Ok(Err(status)) => Err(self.cairn.status_error(Rpc::WatchDeployment, status)),
            Err(_) => Err(self.cairn.status_error(
                Rpc::WatchDeployment,
                tonic::Status::unavailable(format!("no answer within {deadline:?}")),
            )),
        }
    }

    /// Counts a failure; false once the budget is spent.
    async fn back_off(&mut self) -> bool {
        self.failures += 1;
        if self.failures > WATCH_MAX_RECONNECTS {
            return false;
        }
        let wait = self.cairn.options().backoff(self.failures);
        tracing::debug!(deployment_id = %self.deployment_id, after = self.after, ?wait, "watch stream broke; reconnecting");
        tokio::time::sleep(wait).await;
        true
    }

    async fn next(&mut self) -> Option<Result<DeploymentEvent, Error>> {
        loop {
            if self.done {
                return None;
            }
            let stream = match self.stream.as_mut() {
                Some(s) => s,
                None => match self.open().await {
                    Ok(s) => self.stream.insert(s),
                    Err(err) => {
                        if err.status().is_some_and(connection_failed) && self.back_off().await {
                            continue;
                        }
                        self.done = true;
                        return Some(Err(err));
                    }
                },
            };
            match stream.message().await {
                Ok(Some(event)) => {
                    self.failures = 0;
                    if self.after != 0 && event.position <= self.after {
                        continue; // already seen before a reconnect
                    }
                    self.after = event.position;
                    return Some(Ok(event));
                }
                Ok(None) => {
                    self.done = true;
                    return None;
                }
                Err(status) => {
                    self.stream = None;
                    if connection_failed(&status) && self.back_off().await {
                        continue;
                    }
                    self.done = true;
                    return Some(Err(self.cairn.status_error(Rpc::WatchDeployment, status)));
                }
            }
        }
    }
}

impl Deployments {
    /// The events of a deployment after position `after` (0 = from the start), in order
    /// and without gaps: when the stream breaks (UNAVAILABLE, a transport error) it is
    /// reopened with `after` = the last position seen, with backoff, up to
    /// [`WATCH_MAX_RECONNECTS`] consecutive failures. Ends when the server ends the stream;
    /// any other error is yielded once and ends it (UNIMPLEMENTED from a server without
    /// WatchDeployment: poll `get_deployment` instead).
    pub fn watch_deployment(
        &self,
        tenant_id: impl Into<String>,
        deployment_id: impl Into<String>,
        after: u64,
    ) -> impl Stream<Item = Result<DeploymentEvent, Error>> + Send + 'static {
        let state = WatchState {
            cairn: self.cairn.clone(),
            tenant_id: tenant_id.into(),
            deployment_id: deployment_id.into(),
            after,
            stream: None,
            failures: 0,
            done: false,
        };
        futures::stream::unfold(state, |mut state| async move {
            let item = state.next().await?;
            Some((item, state))
        })
    }
}

impl Recovery {
    /// Runs `VerifyAll` and collects its report (the last item has an empty `state_id` and
    /// `ok` for the whole pass). Opening is retried when it got no answer; a broken stream
    /// is not resumed (the pass is run again by the caller).
    pub async fn verify_all(&self) -> Result<Vec<VerifyReportItem>, Error> {
        let options = self.cairn.options().clone();
        let mut attempt = 1;
        let mut stream = loop {
            let req = self
                .cairn
                .stream_request(Rpc::VerifyAll, VerifyAllRequest {})
                .await?;
            let mut client =
                recovery_client::RecoveryClient::new(self.cairn.channel(Endpoint::State)?);
            let status = match tokio::time::timeout(options.deadline, client.verify_all(req)).await
            {
                Ok(Ok(resp)) => break resp.into_inner(),
                Ok(Err(status)) => status,
                Err(_) => tonic::Status::deadline_exceeded("no answer"),
            };
            if connection_failed(&status) && attempt < options.max_attempts {
                tokio::time::sleep(options.backoff(attempt)).await;
                attempt += 1;
                continue;
            }
            return Err(self.cairn.status_error(Rpc::VerifyAll, status));
        };
        let mut items = Vec::new();
        loop {
            match stream.message().await {
                Ok(Some(item)) => items.push(item),
                Ok(None) => return Ok(items),
                Err(status) => return Err(self.cairn.status_error(Rpc::VerifyAll, status)),
            }
        }
    }
}

/// How often a caller without WatchDeployment should poll GetDeployment.
pub const POLL_INTERVAL: Duration = Duration::from_secs(1);
