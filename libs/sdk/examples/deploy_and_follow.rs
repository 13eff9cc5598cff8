//! Deploys an instance and follows the deployment to its end.
//!
//! ```sh
//! CAIRN_API_TOKEN=cairn_… cargo run -p cairn-sdk --example deploy_and_follow -- demo
//! ```
//! Endpoints default to the local ports; `CAIRN_DEPLOYMENTS_URL` and `CAIRN_TENANCY_URL`
//! override them. It watches the deployment's events (reconnecting from the last position
//! when the stream breaks) and polls GetDeployment when the server has no WatchDeployment.
use std::time::Duration;

use anyhow::{Context, bail};
use cairn_sdk::proto::deployments as pb;
use cairn_sdk::{Cairn, Credential, Endpoint};
use futures::StreamExt;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let instance = std::env::args()
        .nth(1)
        .context("usage: deploy_and_follow INSTANCE")?;
    let token = std::env::var("CAIRN_API_TOKEN").context("set CAIRN_API_TOKEN")?;
    let mut builder = Cairn::builder().credential(Credential::parse(&token)?);
    for (var, endpoint) in [
        ("CAIRN_TENANCY_URL", Endpoint::Tenancy),
        ("CAIRN_DEPLOYMENTS_URL", Endpoint::Deployments),
    ] {
        if let Ok(url) = std::env::var(var) {
            builder = builder.endpoint(endpoint, url);
        }
    }
    let cairn = builder.build()?;
    let tenant_id = cairn
        .identity()
        .await?
        .tid
        .context("the token is not a tenant user's")?;

    let deployment = cairn
        .deployments()
        .create_deployment(pb::CreateDeploymentRequest {
            tenant_id: tenant_id.clone(),
            instance_ref: instance.clone(),
            kind: pb::DeploymentKind::Deploy as i32,
            ..Default::default()
        })
        .await?
        .deployment
        .context("no deployment in the answer")?;
    let id = deployment.deployment_id.clone();
    println!("deployment {id} of {instance} requested");

    let mut events = Box::pin(cairn.deployments().watch_deployment(&tenant_id, &id, 0));
    while let Some(event) = events.next().await {
        match event {
            Ok(pb::DeploymentEvent {
                event: Some(pb::deployment_event::Event::Step(step)),
                ..
            }) => println!(
                "{} {:?} {:?} {}",
                step.resource,
                pb::StepKind::try_from(step.kind).unwrap_or_default(),
                pb::StepStatus::try_from(step.status).unwrap_or_default(),
                step.reason
            ),
            Ok(pb::DeploymentEvent {
                event: Some(pb::deployment_event::Event::Log(line)),
                ..
            }) => println!("  | {}", line.text),
            Ok(_) => {}
            Err(err) if err.is_unimplemented() => {
                println!("(this server has no WatchDeployment; polling)");
                break;
            }
            Err(err) => return Err(err.into()),
        }
    }
    loop {
        let d = cairn
            .deployments()
            .get_deployment(pb::GetDeploymentRequest {
                tenant_id: tenant_id.clone(),
                deployment_id: id.clone(),
            })
            .await?
            .deployment
            .context("no deployment in the answer")?;
        let status = pb::DeploymentStatus::try_from(d.status).unwrap_or_default();
        match status {
            pb::DeploymentStatus::Succeeded => {
                println!("succeeded: {}", d.summary);
                return Ok(());
            }
            pb::DeploymentStatus::AwaitingApproval => {
                println!("awaiting approval (plan set {})", d.plan_set_hash);
                return Ok(());
            }
            pb::DeploymentStatus::Failed
            | pb::DeploymentStatus::Cancelled
            | pb::DeploymentStatus::Rejected
            | pb::DeploymentStatus::Expired => bail!("{status:?}: {}", d.summary),
            pb::DeploymentStatus::Unspecified
            | pb::DeploymentStatus::Queued
            | pb::DeploymentStatus::Running => tokio::time::sleep(Duration::from_secs(1)).await,
        }
    }
}
