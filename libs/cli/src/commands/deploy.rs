//! Changing infrastructure: deploy, preview and destroy (with --wait/--watch), the
//! deployments of the tenant, and approving or rejecting a parked one.
use std::io::{BufRead, IsTerminal, Write};

use cairn_proto::deployments as pb;

use crate::app::{App, all_pages};
use crate::cli::{
    DecisionArgs, DeployArgs, DeploymentsCmd, DestroyArgs, FollowArgs, OutputFormat, RunArgs,
};
use crate::commands::resources::params_patch;
use crate::error::{CliError, Result};
use crate::output;
use crate::views::{DeploymentView, LogLineView, PlansView};
use crate::watch;

fn confirm(question: &str) -> Result<bool> {
    if !std::io::stdin().is_terminal() {
        return Err(CliError::Usage(format!(
            "{question}: no terminal to ask; pass --yes"
        )));
    }
    eprint!("{question} [y/N] ");
    std::io::stderr().flush().ok();
    let mut answer = String::new();
    std::io::stdin()
        .lock()
        .read_line(&mut answer)
        .map_err(|e| CliError::Other(format!("read the answer: {e}")))?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes"))
}

async fn request(
    app: &App,
    instance: &str,
    kind: pb::DeploymentKind,
    version: Option<u32>,
    patch: String,
    key: Option<String>,
    follow: FollowArgs,
) -> Result {
    let tenant_id = app.tenant_id().await?;
    let r = app
        .cairn
        .deployments()
        .create_deployment(pb::CreateDeploymentRequest {
            tenant_id: tenant_id.clone(),
            instance_ref: instance.to_owned(),
            kind: kind as i32,
            template_version: version.unwrap_or(0),
            parameters_patch_json: patch,
            idempotency_key: key.unwrap_or_default(),
        })
        .await?;
    let d = r.deployment.unwrap_or_default();
    let id = d.deployment_id.clone();
    if follow.wait || follow.watch {
        if !r.created {
            eprintln!("the idempotency key names the existing deployment {id}");
        }
        if app.output == OutputFormat::Table {
            println!("deployment {id} requested");
        }
        let code = watch::follow(app, &tenant_id, &id, follow.watch).await?;
        if app.output == OutputFormat::Json {
            let d = app
                .cairn
                .deployments()
                .get_deployment(pb::GetDeploymentRequest {
                    tenant_id,
                    deployment_id: id,
                })
                .await?;
            output::one(
                app.output,
                &DeploymentView::from(d.deployment.unwrap_or_default()),
            )?;
        }
        return if code == 0 {
            Ok(())
        } else {
            Err(CliError::Exit(code))
        };
    }
    output::one(app.output, &DeploymentView::from(d))
}

pub async fn deploy(app: &App, args: &DeployArgs) -> Result {
    request(
        app,
        &args.instance,
        pb::DeploymentKind::Deploy,
        args.version,
        params_patch(&args.params)?,
        args.idempotency_key.clone(),
        args.follow,
    )
    .await
}

pub async fn preview(app: &App, args: &RunArgs) -> Result {
    request(
        app,
        &args.instance,
        pb::DeploymentKind::Preview,
        None,
        params_patch(&args.params)?,
        None,
        args.follow,
    )
    .await
}

pub async fn destroy(app: &App, args: &DestroyArgs) -> Result {
    if !args.yes && !confirm(&format!("destroy every resource of {}?", args.instance))? {
        return Err(CliError::Other("not confirmed; nothing destroyed".into()));
    }
    request(
        app,
        &args.instance,
        pb::DeploymentKind::Destroy,
        None,
        String::new(),
        None,
        args.follow,
    )
    .await
}

async fn get(app: &App, tenant_id: &str, id: &str) -> Result<pb::Deployment> {
    Ok(app
        .cairn
        .deployments()
        .get_deployment(pb::GetDeploymentRequest {
            tenant_id: tenant_id.to_owned(),
            deployment_id: id.to_owned(),
        })
        .await?
        .deployment
        .unwrap_or_default())
}

async fn plans(app: &App, tenant_id: &str, id: &str) -> Result<PlansView> {
    let r = app
        .cairn
        .deployments()
        .get_plans(pb::GetPlansRequest {
            tenant_id: tenant_id.to_owned(),
            deployment_id: id.to_owned(),
        })
        .await?;
    Ok(PlansView::new(id.to_owned(), r))
}

fn print_plans(p: &PlansView) {
    for plan in &p.plans {
        match &plan.summary {
            Some(s) => {
                println!(
                    "{}: {} to add, {} to change, {} to destroy (risk {})",
                    plan.resource,
                    s.add,
                    s.change,
                    s.destroy,
                    if s.risk.is_empty() {
                        "unknown"
                    } else {
                        &s.risk
                    }
                );
                for address in &s.replaced {
                    println!("  replace {address}");
                }
            }
            None => println!("{}: no plan summary", plan.resource),
        }
    }
    println!("plan set {}", p.plan_set_hash);
}

async fn logs(app: &App, tenant_id: &str, id: &str, step: Option<&str>, follow: bool) -> Result {
    let d = get(app, tenant_id, id).await?;
    let steps: Vec<&pb::Step> = d
        .steps
        .iter()
        .filter(|s| step.is_none_or(|want| s.step_id == want || s.resource == want))
        .collect();
    if let Some(want) = step
        && steps.is_empty()
    {
        return Err(CliError::Usage(format!(
            "deployment {id} has no step {want:?}"
        )));
    }
    let mut lines = Vec::new();
    for s in steps {
        if s.run_id.is_empty() {
            continue; // never ran: no logs
        }
        let r = app
            .cairn
            .deployments()
            .get_logs(pb::GetLogsRequest {
                tenant_id: tenant_id.to_owned(),
                deployment_id: id.to_owned(),
                step_id: s.step_id.clone(),
            })
            .await?;
        if r.truncated && app.output == OutputFormat::Table {
            eprintln!("note: the logs of {} were truncated", s.step_id);
        }
        lines.extend(r.lines.into_iter().map(LogLineView::from));
    }
    match app.output {
        OutputFormat::Json => output::json(&lines)?,
        OutputFormat::Table => {
            for l in &lines {
                println!("{}", l.text);
            }
        }
    }
    if follow && watch::exit_code(d.status).is_none() {
        let code = watch::follow(app, tenant_id, id, true).await?;
        if code != 0 {
            return Err(CliError::Exit(code));
        }
    }
    Ok(())
}

pub async fn deployments(app: &App, cmd: &DeploymentsCmd) -> Result {
    let tenant_id = app.tenant_id().await?;
    match cmd {
        DeploymentsCmd::List { instance } => {
            let deployments = app.cairn.deployments();
            let list = all_pages(|page_token| {
                let deployments = deployments.clone();
                let tenant_id = tenant_id.clone();
                let instance_ref = instance.clone().unwrap_or_default();
                async move {
                    let r = deployments
                        .list_deployments(pb::ListDeploymentsRequest {
                            tenant_id,
                            instance_ref,
                            page_size: 100,
                            page_token,
                        })
                        .await?;
                    Ok((r.deployments, r.next_page_token))
                }
            })
            .await?;
            let views: Vec<DeploymentView> = list.into_iter().map(DeploymentView::from).collect();
            output::list(app.output, &views)
        }
        DeploymentsCmd::Get { deployment } => output::one(
            app.output,
            &DeploymentView::from(get(app, &tenant_id, deployment).await?),
        ),
        DeploymentsCmd::Watch { deployment } => {
            let code = watch::follow(app, &tenant_id, deployment, true).await?;
            if code == 0 {
                Ok(())
            } else {
                Err(CliError::Exit(code))
            }
        }
        DeploymentsCmd::Plans { deployment } => {
            let p = plans(app, &tenant_id, deployment).await?;
            match app.output {
                OutputFormat::Json => output::json(&p),
                OutputFormat::Table => {
                    print_plans(&p);
                    Ok(())
                }
            }
        }
        DeploymentsCmd::Logs {
            deployment,
            step,
            follow,
        } => logs(app, &tenant_id, deployment, step.as_deref(), *follow).await,
        DeploymentsCmd::Cancel { deployment, reason } => {
            let r = app
                .cairn
                .deployments()
                .cancel(pb::CancelRequest {
                    tenant_id,
                    deployment_id: deployment.clone(),
                    reason: reason.clone(),
                })
                .await?;
            output::one(
                app.output,
                &DeploymentView::from(r.deployment.unwrap_or_default()),
            )
        }
    }
}

/// Approve (or reject) the plan set the caller reviewed: the plans and their hash are
/// shown first, and the decision is bound to that hash.
pub async fn decide(app: &App, args: &DecisionArgs, approve: bool) -> Result {
    let tenant_id = app.tenant_id().await?;
    let p = plans(app, &tenant_id, &args.deployment).await?;
    if app.output == OutputFormat::Table {
        print_plans(&p);
    }
    let verb = if approve { "approve" } else { "reject" };
    if !args.yes && !confirm(&format!("{verb} plan set {}?", p.plan_set_hash))? {
        return Err(CliError::Other("not confirmed; nothing decided".into()));
    }
    let deployments = app.cairn.deployments();
    let d = if approve {
        deployments
            .approve(pb::ApproveRequest {
                tenant_id,
                deployment_id: args.deployment.clone(),
                plan_set_hash: p.plan_set_hash.clone(),
                comment: args.comment.clone(),
            })
            .await?
            .deployment
    } else {
        deployments
            .reject(pb::RejectRequest {
                tenant_id,
                deployment_id: args.deployment.clone(),
                plan_set_hash: p.plan_set_hash.clone(),
                comment: args.comment.clone(),
            })
            .await?
            .deployment
    };
    output::one(app.output, &DeploymentView::from(d.unwrap_or_default()))
}
