//! Drift of deployed instances (the drift service): per-resource status, findings, scans on
//! demand and ignore rules. Instances are named by name or id (deployments resolves them);
//! drift learns of an instance from deployments' events, so it may not know one yet.
use cairn_proto::{deployments as dpb, drift as pb};

use crate::app::{App, all_pages};
use crate::cli::{DriftCmd, OutputFormat};
use crate::error::{CliError, Result};
use crate::output;
use crate::views::{DriftStatusView, FindingView, IgnoreRulesView, ScanView};

/// Drift's NOT_FOUND for an instance deployments knows says so, still on one line with the
/// server's message and code.
fn not_tracked(instance: &dpb::Instance, err: cairn_sdk::Error) -> CliError {
    if err.is_not_found() {
        CliError::Other(format!(
            "drift has no record of instance {} ({}) yet (it learns of instances from deployments' events): {err}",
            instance.name, instance.instance_id
        ))
    } else {
        CliError::Api(err)
    }
}

pub async fn drift(app: &App, cmd: &DriftCmd) -> Result {
    let tenant_id = app.tenant_id().await?;
    let drift = app.cairn.drift();
    match cmd {
        DriftCmd::Status { instance } => {
            let instance = app.instance(instance).await?;
            let r = drift
                .get_drift_status(pb::GetDriftStatusRequest {
                    tenant_id,
                    instance_id: instance.instance_id.clone(),
                })
                .await
                .map_err(|e| not_tracked(&instance, e))?;
            let view = DriftStatusView::new(instance.name, r);
            match app.output {
                OutputFormat::Json => output::json(&view),
                OutputFormat::Table => {
                    println!(
                        "instance {} ({}): {}",
                        view.instance_name, view.instance_id, view.status
                    );
                    if !view.ignore_rules.is_empty() {
                        println!("ignore rules: {}", view.ignore_rules.join(", "));
                    }
                    output::list(app.output, &view.resources)?;
                    for r in &view.resources {
                        if let Some(message) = &r.message {
                            println!("{}: {}", r.resource, message.replace('\n', " "));
                        }
                    }
                    Ok(())
                }
            }
        }
        DriftCmd::Findings {
            instance,
            open,
            resolved,
        } => {
            let instance = match instance {
                Some(i) => Some(app.instance(i).await?),
                None => None,
            };
            let instance_id = instance
                .as_ref()
                .map(|i| i.instance_id.clone())
                .unwrap_or_default();
            let status = match (open, resolved) {
                (true, _) => "open",
                (_, true) => "resolved",
                _ => "",
            };
            let findings = all_pages(|page_token| {
                let drift = drift.clone();
                let tenant_id = tenant_id.clone();
                let instance_id = instance_id.clone();
                async move {
                    let r = drift
                        .list_findings(pb::ListFindingsRequest {
                            tenant_id,
                            instance_id,
                            status: status.to_owned(),
                            page_size: 100,
                            page_token,
                        })
                        .await?;
                    Ok((r.findings, r.next_page_token))
                }
            })
            .await
            .map_err(|e| match (e, &instance) {
                (CliError::Api(e), Some(i)) => not_tracked(i, e),
                (e, _) => e,
            })?;
            let views: Vec<FindingView> = findings.into_iter().map(FindingView::from).collect();
            output::list(app.output, &views)
        }
        DriftCmd::Scan { instance, resource } => {
            let instance = app.instance(instance).await?;
            let r = drift
                .trigger_scan(pb::TriggerScanRequest {
                    tenant_id,
                    instance_id: instance.instance_id.clone(),
                    resource: resource.clone().unwrap_or_default(),
                })
                .await
                .map_err(|e| not_tracked(&instance, e))?;
            let view = ScanView {
                instance_id: instance.instance_id,
                instance_name: instance.name,
                resource: resource.clone(),
                queued: r.queued,
            };
            match app.output {
                OutputFormat::Json => output::json(&view),
                OutputFormat::Table => {
                    println!(
                        "{} resource(s) of {} queued for a drift scan{}",
                        view.queued,
                        view.instance_name,
                        if view.queued == 0 {
                            " (a scan is already in flight, or no such resource is tracked)"
                        } else {
                            ""
                        }
                    );
                    println!("follow it with: cairn drift status {}", view.instance_name);
                    Ok(())
                }
            }
        }
        DriftCmd::Ignore {
            instance,
            paths,
            clear,
        } => {
            let instance = app.instance(instance).await?;
            let rules = if *clear { Vec::new() } else { paths.clone() };
            let r = drift
                .set_ignore_rules(pb::SetIgnoreRulesRequest {
                    tenant_id,
                    instance_id: instance.instance_id.clone(),
                    rules,
                })
                .await
                .map_err(|e| not_tracked(&instance, e))?;
            let view = IgnoreRulesView {
                instance_id: instance.instance_id,
                instance_name: instance.name,
                ignore_rules: r.rules,
            };
            match app.output {
                OutputFormat::Json => output::json(&view),
                OutputFormat::Table => {
                    if view.ignore_rules.is_empty() {
                        println!("{}: no ignore rules", view.instance_name);
                    } else {
                        println!(
                            "{}: ignoring {} (from the next scan on)",
                            view.instance_name,
                            view.ignore_rules.join(", ")
                        );
                    }
                    Ok(())
                }
            }
        }
    }
}
