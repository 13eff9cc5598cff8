//! Operating the platform: states and their recovery, the audit log, a runner's admin API.
use cairn_proto::{deployments as dpb, runner as rpb, state as spb, tenancy as tnpb};

use crate::app::{App, all_pages};
use crate::cli::{AuditCmd, OutputFormat, RunnerCmd, StateCmd};
use crate::error::{CliError, Result};
use crate::output;
use crate::views::{ActiveRunView, AuditView, InspectView, StateView, VerifyItemView};

pub async fn state(app: &App, cmd: &StateCmd) -> Result {
    match cmd {
        StateCmd::List { instance, fenced } => {
            let tenant_id = app.tenant_id().await?;
            let states = if *fenced {
                app.cairn
                    .recovery()
                    .list_fenced(spb::ListFencedRequest { tenant_id })
                    .await?
                    .states
            } else {
                let instance_id = match instance {
                    Some(i) => app
                        .cairn
                        .instances()
                        .get_instance(dpb::GetInstanceRequest {
                            tenant_id: tenant_id.clone(),
                            instance_ref: i.clone(),
                        })
                        .await?
                        .instance
                        .map(|i| i.instance_id)
                        .unwrap_or_default(),
                    None => String::new(),
                };
                let client = app.cairn.states();
                all_pages(|page_token| {
                    let client = client.clone();
                    let tenant_id = tenant_id.clone();
                    let instance_id = instance_id.clone();
                    async move {
                        let r = client
                            .list_states(spb::ListStatesRequest {
                                tenant_id,
                                instance_id,
                                page_size: 100,
                                page_token,
                            })
                            .await?;
                        Ok((r.states, r.next_page_token))
                    }
                })
                .await?
            };
            let views: Vec<StateView> = states.into_iter().map(StateView::from).collect();
            output::list(app.output, &views)
        }
        StateCmd::Inspect { state_id } => {
            let r = app
                .cairn
                .recovery()
                .inspect_state(spb::InspectStateRequest {
                    state_id: state_id.clone(),
                })
                .await?;
            output::one(app.output, &InspectView::from(r))
        }
        StateCmd::Recover {
            state_id,
            rollback_to,
            reason,
        } => {
            let r = app
                .cairn
                .recovery()
                .recover(spb::RecoverRequest {
                    state_id: state_id.clone(),
                    rollback_to_generation: *rollback_to,
                    reason: reason.clone(),
                })
                .await?;
            if app.output == OutputFormat::Table {
                if r.already_recovered {
                    eprintln!("the state was already healthy; nothing done");
                } else if r.new_generation > 0 {
                    eprintln!("rolled back: generation {} written", r.new_generation);
                } else {
                    eprintln!("fence cleared");
                }
            }
            output::one(app.output, &StateView::from(r.state.unwrap_or_default()))
        }
        StateCmd::VerifyAll => {
            let items = app.cairn.recovery().verify_all().await?;
            let ok = items.last().is_some_and(|i| i.state_id.is_empty() && i.ok);
            let views: Vec<VerifyItemView> = items
                .into_iter()
                .filter(|i| !i.state_id.is_empty() || !i.unknown_object_key.is_empty())
                .map(VerifyItemView::from)
                .collect();
            output::list(app.output, &views)?;
            if ok {
                if app.output == OutputFormat::Table {
                    println!("verify-all passed");
                }
                Ok(())
            } else {
                eprintln!("error: verify-all found problems");
                Err(CliError::Exit(1))
            }
        }
        StateCmd::ForceUnlock {
            state_id,
            lock_id,
            reason,
        } => {
            let r = app
                .cairn
                .recovery()
                .force_unlock(spb::ForceUnlockRequest {
                    state_id: state_id.clone(),
                    lock_id: lock_id.clone(),
                    reason: reason.clone(),
                })
                .await?;
            match app.output {
                OutputFormat::Json => output::json(&serde_json::json!({
                    "state_id": state_id, "lock_id": lock_id, "released": r.released
                })),
                OutputFormat::Table => {
                    println!(
                        "{}",
                        if r.released {
                            "lock released"
                        } else {
                            "no such lock was held"
                        }
                    );
                    Ok(())
                }
            }
        }
    }
}

pub async fn audit(app: &App, cmd: &AuditCmd) -> Result {
    let AuditCmd::List {
        actor,
        object_type,
        object_id,
        action,
        since,
        limit,
    } = cmd;
    let tenant_id = app.tenant_id().await?;
    let since = since.map(|d| {
        let t = std::time::SystemTime::now() - d;
        prost_types::Timestamp::from(t)
    });
    let mut entries = Vec::new();
    let mut page_token = String::new();
    while entries.len() < *limit {
        let r = app
            .cairn
            .audit()
            .list_audit_entries(tnpb::ListAuditEntriesRequest {
                tenant_id: tenant_id.clone(),
                actor: actor.clone().unwrap_or_default(),
                object_type: object_type.clone().unwrap_or_default(),
                object_id: object_id.clone().unwrap_or_default(),
                action: action.clone().unwrap_or_default(),
                since,
                until: None,
                page_size: u32::try_from((*limit).min(500)).unwrap_or(500),
                page_token,
            })
            .await?;
        entries.extend(r.entries);
        if r.next_page_token.is_empty() {
            break;
        }
        page_token = r.next_page_token;
    }
    entries.truncate(*limit);
    let views: Vec<AuditView> = entries.into_iter().map(AuditView::from).collect();
    output::list(app.output, &views)
}

pub async fn runner(app: &App, cmd: &RunnerCmd) -> Result {
    let admin = app.cairn.runner_admin();
    match cmd {
        RunnerCmd::List => {
            let r = admin.list_runs(rpb::ListRunsRequest {}).await?;
            match app.output {
                OutputFormat::Json => output::json(&serde_json::json!({
                    "runner_instance": r.runner_instance,
                    "targets": r.targets,
                    "runs": r.runs.into_iter().map(ActiveRunView::from).collect::<Vec<_>>(),
                })),
                OutputFormat::Table => {
                    println!(
                        "runner {} (targets: {})",
                        r.runner_instance,
                        r.targets.join(",")
                    );
                    let views: Vec<ActiveRunView> =
                        r.runs.into_iter().map(ActiveRunView::from).collect();
                    output::list(app.output, &views)
                }
            }
        }
        RunnerCmd::Cancel { run_id, reason } => {
            let r = admin
                .cancel_run(rpb::CancelRunRequest {
                    run_id: run_id.clone(),
                    reason: reason.clone(),
                })
                .await?;
            match app.output {
                OutputFormat::Json => {
                    output::json(&serde_json::json!({"run_id": run_id, "cancelled": r.cancelled}))
                }
                OutputFormat::Table => {
                    println!(
                        "{}",
                        if r.cancelled {
                            "cancel sent"
                        } else {
                            "this runner is not running it"
                        }
                    );
                    Ok(())
                }
            }
        }
    }
}
