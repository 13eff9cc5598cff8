//! Following a deployment: `--wait` polls GetDeployment until it ends; `--watch` shows live
//! progress from WatchDeployment (falling back to polling, said once, on a server without
//! it): one line per step with its phase, a spinner per running step on a terminal
//! (indicatif), plain timestamped lines otherwise, the plan lines
//! (`api: 0 to add, 1 to change, 0 to destroy`, `replace …`) and failures in red with the
//! step's last log lines. Each line carries its event's time (a replayed deployment shows
//! when things happened, not when they were printed). A status of awaiting approval ends
//! the watch only while the deployment is still parked: one approved since is followed on
//! to its end. Ctrl-C stops watching, never the deployment.
use std::collections::HashMap;
use std::io::IsTerminal;
use std::time::Duration;

use cairn_proto::deployments as pb;
use futures::StreamExt;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

use crate::app::App;
use crate::error::{CliError, Result};
use crate::views::{deployment_status, step_kind, step_status};

/// The exit code of an ended (or parked) deployment: 0 succeeded, 3 awaiting approval,
/// 1 otherwise; None while it still runs.
pub fn exit_code(status: i32) -> Option<u8> {
    match pb::DeploymentStatus::try_from(status).unwrap_or_default() {
        pb::DeploymentStatus::Succeeded => Some(0),
        pb::DeploymentStatus::AwaitingApproval => Some(3),
        pb::DeploymentStatus::Failed
        | pb::DeploymentStatus::Cancelled
        | pb::DeploymentStatus::Rejected
        | pb::DeploymentStatus::Expired => Some(1),
        pb::DeploymentStatus::Unspecified
        | pb::DeploymentStatus::Queued
        | pb::DeploymentStatus::Running => None,
    }
}

const RED: &str = "\x1b[31m";
const GREEN: &str = "\x1b[32m";
const DIM: &str = "\x1b[2m";
const RESET: &str = "\x1b[0m";

struct Progress {
    /// Progress goes to stderr (stdout carries the `--output json` document).
    to_stderr: bool,
    color: bool,
    multi: Option<MultiProgress>,
    bars: HashMap<String, ProgressBar>,
    seen: HashMap<String, (i32, u32)>,
    status: i32,
    /// The time of the event being shown (None: now, as when polling).
    at: Option<String>,
}

fn now() -> String {
    clock(chrono::Local::now())
}

fn clock(at: chrono::DateTime<chrono::Local>) -> String {
    at.format("%H:%M:%S").to_string()
}

/// An event's time as a line's clock; `None` for an event without a valid one.
fn event_clock(at: Option<&prost_types::Timestamp>) -> Option<String> {
    let utc = crate::views::utc(at?)?;
    Some(clock(utc.with_timezone(&chrono::Local)))
}

fn label(step: &pb::Step) -> String {
    if step.resource.is_empty() {
        step_kind(step.kind)
    } else {
        format!("{} {}", step.resource, step_kind(step.kind))
    }
}

impl Progress {
    fn new(to_stderr: bool) -> Progress {
        let term = if to_stderr {
            std::io::stderr().is_terminal()
        } else {
            std::io::stdout().is_terminal()
        };
        Progress {
            to_stderr,
            color: term,
            multi: term.then(MultiProgress::new),
            bars: HashMap::new(),
            seen: HashMap::new(),
            status: 0,
            at: None,
        }
    }

    fn line(&self, text: &str) {
        match &self.multi {
            Some(m) => {
                if m.println(text).is_err() {
                    self.print(text);
                }
            }
            None => {
                let at = self.at.clone().unwrap_or_else(now);
                self.print(&format!("{at} {text}"));
            }
        }
    }

    fn print(&self, text: &str) {
        if self.to_stderr {
            eprintln!("{text}");
        } else {
            println!("{text}");
        }
    }

    fn paint(&self, color: &str, text: &str) -> String {
        if self.color {
            format!("{color}{text}{RESET}")
        } else {
            text.to_owned()
        }
    }

    fn deployment_status(&mut self, status: i32) {
        if status != self.status {
            self.status = status;
            self.line(&format!("deployment {}", deployment_status(status)));
        }
    }

    /// Shows a step's new view; unchanged views are skipped. Returns true when it just failed.
    fn step(&mut self, step: &pb::Step) -> bool {
        let key = (step.status, step.tries);
        if self.seen.get(&step.step_id) == Some(&key) {
            return false;
        }
        self.seen.insert(step.step_id.clone(), key);
        let status = pb::StepStatus::try_from(step.status).unwrap_or_default();
        let name = label(step);
        let reason = if step.reason.is_empty() {
            String::new()
        } else {
            format!(" ({})", step.reason)
        };
        let tries = if step.tries > 1 {
            format!(" [try {}]", step.tries)
        } else {
            String::new()
        };
        let text = format!("{name}: {}{tries}{reason}", step_status(step.status));
        let running = matches!(status, pb::StepStatus::Running);
        let ended = !matches!(status, pb::StepStatus::Pending | pb::StepStatus::Running);
        if let Some(multi) = &self.multi {
            if running {
                let bar = self.bars.entry(step.step_id.clone()).or_insert_with(|| {
                    let bar = multi.add(ProgressBar::new_spinner());
                    bar.set_style(
                        ProgressStyle::with_template("{spinner} {msg} {elapsed:.dim}")
                            .unwrap_or_else(|_| ProgressStyle::default_spinner()),
                    );
                    bar.enable_steady_tick(Duration::from_millis(120));
                    bar
                });
                bar.set_message(text.clone());
            } else if ended && let Some(bar) = self.bars.remove(&step.step_id) {
                bar.finish_and_clear();
                multi.remove(&bar);
            }
        }
        if !running || self.multi.is_none() {
            let text = match status {
                pb::StepStatus::Failed => self.paint(RED, &text),
                pb::StepStatus::Succeeded => self.paint(GREEN, &text),
                pb::StepStatus::Skipped | pb::StepStatus::Cancelled => self.paint(DIM, &text),
                _ => text,
            };
            if status != pb::StepStatus::Pending {
                self.line(&text);
            }
        }
        if let (Some(plan), pb::StepStatus::Succeeded) = (&step.plan, status)
            && matches!(
                pb::StepKind::try_from(step.kind).unwrap_or_default(),
                pb::StepKind::Plan | pb::StepKind::Probe
            )
        {
            let who = if step.resource.is_empty() {
                "plan"
            } else {
                &step.resource
            };
            self.line(&format!(
                "{who}: {} to add, {} to change, {} to destroy",
                plan.add, plan.change, plan.destroy
            ));
            for address in &plan.replaced {
                self.line(&format!("  replace {address}"));
            }
        }
        status == pb::StepStatus::Failed
    }

    fn log(&self, line: &pb::LogLine) {
        self.line(&self.paint(DIM, &format!("  | {}", line.text)));
    }

    fn finish(&mut self) {
        for (_, bar) in self.bars.drain() {
            bar.finish_and_clear();
        }
    }
}

async fn get(app: &App, tenant_id: &str, id: &str) -> Result<pb::Deployment> {
    app.cairn
        .deployments()
        .get_deployment(pb::GetDeploymentRequest {
            tenant_id: tenant_id.to_owned(),
            deployment_id: id.to_owned(),
        })
        .await?
        .deployment
        .ok_or_else(|| CliError::Other("deployments answered without a deployment".into()))
}

/// The last log lines of a failed step, shown under it (nothing when logs are not
/// available yet).
async fn last_lines(app: &App, progress: &Progress, tenant_id: &str, d: &str, step: &pb::Step) {
    let Ok(logs) = app
        .cairn
        .deployments()
        .get_logs(pb::GetLogsRequest {
            tenant_id: tenant_id.to_owned(),
            deployment_id: d.to_owned(),
            step_id: step.step_id.clone(),
        })
        .await
    else {
        return;
    };
    let skip = logs.lines.len().saturating_sub(10);
    for line in &logs.lines[skip..] {
        progress.line(&progress.paint(RED, &format!("  | {}", line.text)));
    }
}

async fn poll(
    app: &App,
    tenant_id: &str,
    id: &str,
    mut progress: Option<&mut Progress>,
) -> Result<pb::Deployment> {
    loop {
        let d = get(app, tenant_id, id).await?;
        if let Some(p) = progress.as_deref_mut() {
            p.deployment_status(d.status);
            for step in &d.steps {
                if p.step(step) {
                    last_lines(app, p, tenant_id, id, step).await;
                }
            }
        }
        if exit_code(d.status).is_some() {
            return Ok(d);
        }
        tokio::time::sleep(cairn_sdk::POLL_INTERVAL).await;
    }
}

/// Whether deployment `id` still awaits its approval now.
async fn still_parked(app: &App, tenant_id: &str, id: &str) -> Result<bool> {
    let d = get(app, tenant_id, id).await?;
    Ok(d.status == pb::DeploymentStatus::AwaitingApproval as i32)
}

async fn stream(
    app: &App,
    tenant_id: &str,
    id: &str,
    progress: &mut Progress,
) -> Result<pb::Deployment> {
    let mut events = Box::pin(app.cairn.deployments().watch_deployment(tenant_id, id, 0));
    while let Some(event) = events.next().await {
        match event {
            Ok(ev) => {
                progress.at = event_clock(ev.at.as_ref());
                match ev.event {
                    Some(pb::deployment_event::Event::Status(s)) => {
                        progress.deployment_status(s);
                        // Parked, unless it was approved since (a replay): then on to its end.
                        let parked = s == pb::DeploymentStatus::AwaitingApproval as i32;
                        if exit_code(s).is_some()
                            && (!parked || still_parked(app, tenant_id, id).await?)
                        {
                            break;
                        }
                    }
                    Some(pb::deployment_event::Event::Step(step)) if progress.step(&step) => {
                        last_lines(app, progress, tenant_id, id, &step).await;
                    }
                    Some(pb::deployment_event::Event::Step(_)) => {}
                    Some(pb::deployment_event::Event::Log(line)) => progress.log(&line),
                    None => {}
                }
            }
            Err(err) if err.is_unimplemented() => {
                progress.at = None;
                progress.line("note: this deployments server has no WatchDeployment yet; polling GetDeployment instead");
                return poll(app, tenant_id, id, Some(progress)).await;
            }
            Err(err) => return Err(err.into()),
        }
    }
    // The stream ended (or the deployment did): the final view decides.
    progress.at = None;
    let d = get(app, tenant_id, id).await?;
    if exit_code(d.status).is_none() {
        return poll(app, tenant_id, id, Some(progress)).await;
    }
    Ok(d)
}

/// Follows deployment `id` until it ends or parks; returns its exit code.
pub async fn follow(app: &App, tenant_id: &str, id: &str, watch: bool) -> Result<u8> {
    let mut progress = Progress::new(app.output == crate::cli::OutputFormat::Json);
    let work = async {
        if watch {
            stream(app, tenant_id, id, &mut progress).await
        } else {
            poll(app, tenant_id, id, None).await
        }
    };
    let d = tokio::select! {
        d = work => d?,
        _ = tokio::signal::ctrl_c() => {
            eprintln!("stopped watching; deployment {id} continues (follow it with `cairn deployments watch {id}`)");
            return Ok(130);
        }
    };
    progress.finish();
    let code = exit_code(d.status).unwrap_or(1);
    let status = deployment_status(d.status);
    let summary = if d.summary.is_empty() {
        String::new()
    } else {
        format!(": {}", d.summary)
    };
    match code {
        0 => progress.print(&format!("deployment {id} {status}{summary}")),
        3 => progress.print(&format!(
            "deployment {id} is awaiting approval (plan set {}); review with `cairn deployments plans {id}`, then `cairn approve {id}`",
            d.plan_set_hash
        )),
        _ => eprintln!("error: deployment {id} {status}{summary}"),
    }
    Ok(code)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_line_carries_its_event_time_in_local_time_and_none_without_a_valid_one() {
        let at = prost_types::Timestamp {
            seconds: 1_765_000_000,
            nanos: 5,
        };
        let local = chrono::DateTime::from_timestamp(1_765_000_000, 5).map(|t| {
            t.with_timezone(&chrono::Local)
                .format("%H:%M:%S")
                .to_string()
        });
        assert_eq!(event_clock(Some(&at)), local);
        assert!(local.is_some());
        assert_eq!(event_clock(None), None);
        let bad = prost_types::Timestamp {
            seconds: 1,
            nanos: -1,
        };
        assert_eq!(event_clock(Some(&bad)), None);
    }
}
