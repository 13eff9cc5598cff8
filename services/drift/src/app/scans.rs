//! Scans: the scheduler's tick (claim what is due within the per-target bound, skip
//! instances with a deployment in progress), the dispatch of a claimed scan (the applied
//! config read back from the coordinator, registered as a read-only drift run, its request
//! written to the message outbox), and a scan's result (discarded when it raced a
//! deployment — by drift's counter from the events, or by the coordinator's word that the
//! scan's state changed since its registration — or a newer apply; else the resource's
//! verdict, a finding and an event when it is news).
use std::collections::HashSet;

use cairn_proto::runner as rpb;
use cairn_proto::state as spb;
use cairn_tofu::{DriftAction, DriftFinding, IgnoreRule};
use chrono::{DateTime, Utc};
use prost::Message;
use uuid::Uuid;

use super::App;
use super::events::{DriftNews, drift};
use crate::domain::verdict::{Ending, Fence, News, Status, discard, verdict};
use crate::error::{Error, Result};
use crate::store::findings::{self, FindingRow};
use crate::store::scans::{self, ScanRow};
use crate::store::tracking::{self, ScanOutcome};

/// What one tick did.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Tick {
    /// Scans claimed (and dispatched).
    pub claimed: usize,
    /// Due resources skipped to their next slot (a deployment in progress).
    pub skipped: usize,
    /// Due resources left due (their target's slots are taken).
    pub waiting: usize,
    /// Open scans ended as timed out.
    pub expired: usize,
}

/// What a result did.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ResultOutcome {
    /// Not a scan of this service (or already ended): ignored.
    Unknown,
    Discarded,
    /// The coordinator could not be asked whether the scan's state changed meanwhile: no
    /// verdict; the resource is due again at the next tick.
    Postponed,
    Counted(Status),
}

impl App {
    /// One pass of the scheduler.
    pub async fn tick(&self) -> Result<Tick> {
        self.tick_at(Utc::now()).await
    }

    /// One pass of the scheduler as of `now` (what is due by then is claimed; the next slots
    /// follow it). The scheduler passes the clock; the benchmark steps through an interval.
    pub async fn tick_at(&self, now: DateTime<Utc>) -> Result<Tick> {
        let mut tick = Tick {
            expired: self.expire_stale().await?,
            ..Tick::default()
        };
        let (claimed, skipped, waiting) = self.claim_due(now).await?;
        tick.claimed = claimed.len();
        tick.skipped = skipped;
        tick.waiting = waiting;
        for scan in claimed {
            self.dispatch(&scan).await;
        }
        Ok(tick)
    }

    /// Claims what is due by `now`, in one transaction: the claimed scans, how many due
    /// resources were skipped (a deployment in progress) and how many wait for a slot of
    /// their target. Issues 1 + 6 · (due rows read) statements.
    async fn claim_due(&self, now: DateTime<Utc>) -> Result<(Vec<ScanRow>, usize, usize)> {
        let s = self.settings.clone();
        let claimed = cairn_db::transaction!(&self.pool, |conn| {
            let mut due = tracking::tracked_due(conn, now, s.batch).await?;
            // One lock order on target rows for every replica.
            due.sort_by(|a, b| a.target_id.cmp(&b.target_id));
            let (mut claimed, mut skipped, mut waiting) = (Vec::new(), 0usize, 0usize);
            let mut full: HashSet<String> = HashSet::new();
            for r in due {
                let (deployments, in_progress, _) =
                    tracking::instance_fence(conn, r.instance_id).await?;
                if in_progress {
                    let next = s.schedule.next_slot(r.phase, now);
                    tracking::tracked_reschedule(conn, r.resource_id, next, None).await?;
                    skipped += 1;
                    continue;
                }
                if full.contains(&r.target_id)
                    || !scans::slot_take(conn, &r.target_id, s.max_per_target).await?
                {
                    full.insert(r.target_id.clone());
                    waiting += 1;
                    continue;
                }
                let scan = ScanRow {
                    scan_id: Uuid::now_v7(),
                    resource_id: r.resource_id,
                    tenant_id: r.tenant_id,
                    instance_id: r.instance_id,
                    target_id: r.target_id.clone(),
                    applied_run_id: r.applied_run_id,
                    slot_at: r.next_due_at,
                    deployments,
                    replica: s.replica.clone(),
                    status: "claimed".to_owned(),
                };
                let next = s.schedule.next_slot(r.phase, now.max(r.next_due_at));
                if scans::scan_insert(conn, &scan).await? {
                    tracking::tracked_reschedule(conn, r.resource_id, next, Some(scan.scan_id))
                        .await?;
                    claimed.push(scan);
                } else {
                    // This slot of the resource was scanned already.
                    scans::slot_release(conn, &r.target_id).await?;
                    tracking::tracked_reschedule(conn, r.resource_id, next, None).await?;
                }
            }
            Ok::<_, Error>((claimed, skipped, waiting))
        })?;
        Ok(claimed)
    }

    /// Gives resources tracked while the schedule was off (parked at `never`) their slot,
    /// once the schedule is on; returns how many.
    pub async fn unpark(&self) -> Result<usize> {
        let schedule = self.settings.schedule;
        if schedule.is_off() {
            return Ok(0);
        }
        let never = crate::domain::schedule::never();
        let mut total = 0;
        loop {
            let n = cairn_db::transaction!(&self.pool, |conn| {
                let parked = tracking::tracked_parked(conn, never, 500).await?;
                let now = Utc::now();
                for (resource_id, phase) in &parked {
                    let next = schedule.next_slot(*phase, now);
                    tracking::tracked_reschedule(conn, *resource_id, next, None).await?;
                }
                Ok::<_, Error>(parked.len())
            })?;
            total += n;
            if n == 0 {
                return Ok(total);
            }
        }
    }

    /// Registers the claimed scan with the coordinator and requests it. When the coordinator
    /// was briefly away the scan is postponed to the next tick (no verdict); any other failure
    /// ends it CHECK_FAILED with the reason.
    async fn dispatch(&self, scan: &ScanRow) {
        match self.request(scan).await {
            Ok(()) => {
                tracing::info!(scan_id = %scan.scan_id, instance_id = %scan.instance_id, "drift scan requested");
            }
            Err(Error::Peer(peer)) if peer.is_transient() => {
                let message = peer.to_string();
                tracing::warn!(scan_id = %scan.scan_id, error = %message, "drift scan postponed: the coordinator could not be asked");
                if let Err(e) = self.postpone(scan, &message).await {
                    tracing::warn!(scan_id = %scan.scan_id, error = %e, "postponed scan not recorded; it expires later");
                }
            }
            Err(err) => {
                let class = match &err {
                    Error::Base(cairn_service::BaseError::FailedPrecondition(_))
                    | Error::Base(cairn_service::BaseError::NotFound(_)) => "config",
                    _ => "transient",
                };
                let message = format!("{err}");
                tracing::warn!(scan_id = %scan.scan_id, error = %message, "drift scan could not be requested");
                let failed = rpb::RunResult {
                    run_id: scan.scan_id.to_string(),
                    outcome: spb::RunOutcome::Failed as i32,
                    message,
                    ..Default::default()
                };
                if let Err(e) = self.record_result(&failed, Some(class), false).await {
                    tracing::warn!(scan_id = %scan.scan_id, error = %e, "failed scan not recorded; it expires later");
                }
            }
        }
    }

    /// Ends a scan that could not be requested without a verdict, frees its slot, and makes
    /// its resource due again at the next tick.
    async fn postpone(&self, scan: &ScanRow, message: &str) -> Result<()> {
        let retry = chrono::Duration::from_std(self.settings.retry_after)
            .map_err(|e| Error::internal(e.to_string()))?;
        let at = Utc::now() + retry;
        cairn_db::transaction!(&self.pool, |conn| {
            if scans::scan_end(conn, scan.scan_id, "postponed", "transient", message).await? {
                scans::slot_release(conn, &scan.target_id).await?;
                tracking::tracked_retry(conn, scan.resource_id, scan.scan_id, at).await?;
            }
            Ok::<_, Error>(())
        })
    }

    async fn request(&self, scan: &ScanRow) -> Result<()> {
        let applied = self.coord.registered_config(scan.applied_run_id).await?;
        self.coord.register_scan(scan.scan_id, applied).await?;
        let subject = cairn_bus::Namespace::root()
            .runq(&scan.target_id)
            .map_err(|e| Error::internal(e.to_string()))?;
        let request = rpb::RunRequest {
            run_id: scan.scan_id.to_string(),
            target_id: scan.target_id.clone(),
        }
        .encode_to_vec();
        let scan_id = scan.scan_id;
        cairn_db::transaction!(&self.pool, |conn| {
            if scans::scan_requested(conn, scan_id).await? {
                cairn_bus::message_outbox_insert(conn, &subject, &scan_id.to_string(), &request)
                    .await?;
            }
            Ok::<_, Error>(())
        })?;
        self.messages_notify.notify_one();
        Ok(())
    }

    /// Ends open scans older than the scan timeout (CHECK_FAILED, timed_out).
    async fn expire_stale(&self) -> Result<usize> {
        let timeout = self.settings.scan_timeout.as_secs_f64();
        let stale = cairn_db::transaction!(&self.pool, |conn| {
            Ok::<_, Error>(scans::scans_stale(conn, timeout, 100).await?)
        })?;
        let mut n = 0;
        for scan in stale {
            let timed_out = rpb::RunResult {
                run_id: scan.scan_id.to_string(),
                outcome: spb::RunOutcome::TimedOut as i32,
                error_class: rpb::ErrorClass::TimedOut as i32,
                message: "no result within the scan timeout".to_owned(),
                ..Default::default()
            };
            if self.record_result(&timed_out, None, false).await? != ResultOutcome::Unknown {
                n += 1;
            }
        }
        Ok(n)
    }

    /// A run result from `cairn.runres.*`: results of runs that are not open scans of this
    /// service are ignored. For an open scan the coordinator is asked first whether the
    /// scan's state changed since the scan was registered (a deployment drift has not heard
    /// of yet); a transient failure to ask postpones the scan (no verdict, slot freed, due
    /// again at the next tick), any other refusal ends it CHECK_FAILED with the reason.
    pub async fn on_result(&self, result: &rpb::RunResult) -> Result<ResultOutcome> {
        let Ok(scan_id) = Uuid::parse_str(&result.run_id) else {
            return Ok(ResultOutcome::Unknown);
        };
        let mut conn = self.pool.acquire().await?;
        let Some(scan) = scans::scan_open(&mut conn, scan_id).await? else {
            return Ok(ResultOutcome::Unknown);
        };
        let tracked = tracking::tracked_exists(&mut conn, scan.resource_id).await?;
        drop(conn);
        if !tracked {
            // Destroyed or its instance deleted: discarded, whatever the coordinator says.
            return self.record_result(result, None, false).await;
        }
        match self.coord.scan_overtaken(scan_id).await {
            Ok(state_changed) => self.record_result(result, None, state_changed).await,
            Err(Error::Peer(peer)) if peer.is_transient() => {
                let message = peer.to_string();
                tracing::warn!(%scan_id, error = %message, "drift result not counted: the coordinator could not be asked; scan postponed");
                self.postpone(&scan, &message).await?;
                self.scheduler_notify.notify_one();
                Ok(ResultOutcome::Postponed)
            }
            Err(err) => {
                let failed = rpb::RunResult {
                    run_id: result.run_id.clone(),
                    outcome: spb::RunOutcome::Failed as i32,
                    message: format!("{err}"),
                    ..Default::default()
                };
                self.record_result(&failed, Some("config"), false).await
            }
        }
    }

    /// Ends an open scan with `result`; `state_changed` is the coordinator's answer for a
    /// result of the scan's run (false for the endings drift makes itself: a timeout, a
    /// request that failed).
    async fn record_result(
        &self,
        result: &rpb::RunResult,
        class_override: Option<&str>,
        state_changed: bool,
    ) -> Result<ResultOutcome> {
        let Ok(scan_id) = Uuid::parse_str(&result.run_id) else {
            return Ok(ResultOutcome::Unknown);
        };
        let ending = ending_of(result, class_override);
        let (outcome, news) = cairn_db::transaction!(&self.pool, |conn| {
            let Some(scan) = scans::scan_open_lock(conn, scan_id).await? else {
                return Ok::<_, Error>((ResultOutcome::Unknown, News::None));
            };
            let tracked = tracking::tracked_lock(conn, scan.resource_id).await?;
            let (deployments, in_progress, rules) =
                tracking::instance_fence(conn, scan.instance_id).await?;
            let at_claim = Fence {
                deployments: scan.deployments,
                applied_run_id: scan.applied_run_id,
            };
            let now = tracked.as_ref().map(|t| Fence {
                deployments,
                applied_run_id: t.applied_run_id,
            });
            let reason = discard(&at_claim, now.as_ref(), in_progress, state_changed);
            let (Some(t), None) = (tracked, reason) else {
                let why = reason.map_or("", |r| r.as_str());
                scans::scan_end(conn, scan_id, "discarded", "", why).await?;
                scans::slot_release(conn, &scan.target_id).await?;
                tracking::tracked_scan_clear(conn, scan.resource_id, scan_id).await?;
                return Ok((ResultOutcome::Discarded, News::None));
            };
            let rules: Vec<IgnoreRule> = rules
                .iter()
                .filter_map(|r| IgnoreRule::parse(r).ok())
                .collect();
            let v = verdict(ending.clone(), &rules, &t.fingerprint);
            let mut finding_id = match v.status {
                Status::InSync | Status::Unknown => None,
                Status::DriftDetected | Status::CheckFailed => t.finding_id,
            };
            let news = |finding_id| DriftNews {
                tenant_id: t.tenant_id,
                instance_id: t.instance_id,
                resource: &t.resource,
                finding_id,
                target_id: &t.target_id,
                environment: &t.environment,
                scan_id: Some(scan_id),
                summary: &v.summary,
                fingerprint: &v.fingerprint,
            };
            match v.news {
                News::None => {}
                News::Detected => {
                    findings::finding_resolve(conn, t.instance_id, &t.resource).await?;
                    let id = Uuid::now_v7();
                    findings::finding_insert(
                        conn,
                        &FindingRow {
                            finding_id: id,
                            tenant_id: t.tenant_id,
                            instance_id: t.instance_id,
                            resource: t.resource.clone(),
                            scan_id,
                            fingerprint: v.fingerprint.clone(),
                            summary: v.summary.clone(),
                            changes: changes_json(&v.findings),
                            status: "open".to_owned(),
                            detected_at: Utc::now(),
                            resolved_at: None,
                        },
                    )
                    .await?;
                    drift(conn, &news(id), true).await?;
                    finding_id = Some(id);
                }
                News::Resolved => {
                    if let Some(id) =
                        findings::finding_resolve(conn, t.instance_id, &t.resource).await?
                    {
                        drift(conn, &news(id), false).await?;
                    }
                    finding_id = None;
                }
            }
            tracking::tracked_scanned(
                conn,
                t.resource_id,
                &ScanOutcome {
                    status: v.status.as_str(),
                    error_class: &v.error_class,
                    message: &v.message,
                    fingerprint: &v.fingerprint,
                    finding_id,
                },
            )
            .await?;
            let scan_status = if v.status == Status::CheckFailed {
                "failed"
            } else {
                "succeeded"
            };
            scans::scan_end(conn, scan_id, scan_status, &v.error_class, &v.message).await?;
            scans::slot_release(conn, &scan.target_id).await?;
            Ok((ResultOutcome::Counted(v.status), v.news))
        })?;
        let event = match news {
            News::None => None,
            News::Detected => Some("detected"),
            News::Resolved => Some("resolved"),
        };
        if let Some(event) = event {
            crate::metrics::finding(event);
            self.events_notify.notify_one();
        }
        if outcome != ResultOutcome::Unknown {
            self.scheduler_notify.notify_one();
            tracing::info!(%scan_id, ?outcome, "drift scan ended");
        }
        Ok(outcome)
    }
}

/// The findings as stored with a finding (no values).
fn changes_json(findings: &[DriftFinding]) -> serde_json::Value {
    serde_json::Value::Array(
        findings
            .iter()
            .map(|f| {
                serde_json::json!({
                    "address": f.address,
                    "action": f.action.as_str(),
                    "attributes": f.attributes,
                })
            })
            .collect(),
    )
}

/// How the scan's run ended, from its result.
fn ending_of(r: &rpb::RunResult, class_override: Option<&str>) -> Ending {
    if spb::RunOutcome::try_from(r.outcome) == Ok(spb::RunOutcome::Succeeded) {
        let mut found: Vec<DriftFinding> = r
            .drift_findings
            .iter()
            .map(|f| DriftFinding {
                address: f.address.clone(),
                action: DriftAction::parse(&f.action).unwrap_or(DriftAction::Update),
                attributes: f.attributes.clone(),
                relevant: f.relevant.clone(),
            })
            .collect();
        // A runner that sends no findings: any planned action of its summary is drift.
        if found.is_empty()
            && let Some(s) = &r.summary
        {
            found = s
                .resources
                .iter()
                .map(|c| {
                    let has = |a: &str| c.actions.iter().any(|x| x == a);
                    let action = match (has("create"), has("delete")) {
                        (true, true) => DriftAction::Replace,
                        (true, false) => DriftAction::Delete,
                        (false, true) => DriftAction::Remove,
                        (false, false) => DriftAction::Update,
                    };
                    DriftFinding {
                        address: c.address.clone(),
                        action,
                        attributes: Vec::new(),
                        relevant: Vec::new(),
                    }
                })
                .collect();
        }
        return Ending::Planned(found);
    }
    let class = class_override
        .or_else(|| cairn_sdk::run_result::error_class_name(r.error_class))
        .unwrap_or("unspecified")
        .to_owned();
    Ending::Failed {
        class,
        message: r.message.chars().take(500).collect(),
    }
}
