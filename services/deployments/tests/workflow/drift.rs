//! Drift status on the instance: the drift service's `instance.drift_detected` /
//! `drift_resolved` events (published here as the drift service does, with
//! `cairn_bus::new_event` on the test's prefix) set the resource's drift status in
//! GetInstance; a redelivered event, one older than the resource's last apply or than the
//! last event, and another tenant's change nothing.
use std::time::{Duration, Instant};

use cairn_proto::deployments as pb;
use cairn_proto::events::{DriftChange, Event, event::Payload};
use pb::DeploymentStatus as S;
use pb::DriftStatus as D;
use uuid::Uuid;

use crate::helpers::PARAMS;
use crate::rig::*;

/// A drift event as services/drift writes it (aggregate "instance", its id the instance's).
fn drift_event(tenant: Uuid, instance_id: &str, resource: &str, detected: bool) -> Event {
    let (event_type, status) = if detected {
        ("drift_detected", "drift_detected")
    } else {
        ("drift_resolved", "in_sync")
    };
    cairn_bus::new_event(
        cairn_bus::ServiceRole::Drift,
        tenant,
        cairn_bus::Aggregate::Instance,
        instance_id,
        event_type,
        "svc:drift",
        Payload::Drift(DriftChange {
            instance_id: instance_id.to_owned(),
            resource: resource.to_owned(),
            finding_id: Uuid::now_v7().to_string(),
            target_id: String::new(),
            environment: "staging".into(),
            scan_id: Uuid::now_v7().to_string(),
            status: status.into(),
            summary: format!("1 resource drifted: module.{resource} (update)"),
            fingerprint: "f".repeat(64),
        }),
    )
    .unwrap()
}

/// The event, `by` earlier than now.
fn earlier(mut event: Event, by: Duration) -> Event {
    let at = std::time::SystemTime::now() - by;
    event.occurred_at = Some(at.into());
    event
}

impl Rig {
    async fn publish(&self, event: &Event) {
        let ns = cairn_bus::Namespace::with_prefix(&self.nats.prefix).unwrap();
        cairn_bus::publish_event(&self.nats.jetstream, &ns, event)
            .await
            .unwrap();
    }

    /// The same event again under another message id (JetStream stores it twice, as after
    /// a relay's retry past the duplicate window).
    async fn publish_again(&self, event: &Event) {
        let ns = cairn_bus::Namespace::with_prefix(&self.nats.prefix).unwrap();
        let subject = cairn_bus::event_subject(&ns, event).unwrap();
        cairn_bus::publish_msg(
            &self.nats.jetstream,
            &subject,
            &Uuid::new_v4().to_string(),
            event,
        )
        .await
        .unwrap();
    }

    async fn drift_of(&self, instance: &str) -> Vec<(String, D)> {
        self.instance(instance)
            .await
            .resources
            .iter()
            .map(|r| (r.name.clone(), D::try_from(r.drift_status).unwrap()))
            .collect()
    }

    async fn drift_until(&self, instance: &str, resource: &str, want: D) -> Vec<(String, D)> {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let all = self.drift_of(instance).await;
            if all.iter().any(|(r, d)| r == resource && *d == want) {
                return all;
            }
            assert!(
                Instant::now() < deadline,
                "{resource} of {instance} never became {want:?}: {all:?}"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

fn of(all: &[(String, D)], resource: &str) -> D {
    all.iter()
        .find(|(r, _)| r == resource)
        .unwrap_or_else(|| panic!("no {resource} in {all:?}"))
        .1
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn drift_events_set_the_resources_drift_status_newest_first() {
    let rig = rig(Opts::default()).await;
    rig.create_instance("shop", "staging", PARAMS).await;
    let id = rig.request("shop", pb::DeploymentKind::Deploy, "").await;
    assert_eq!(status(&rig.settled(&id).await), S::Succeeded);
    let instance_id = rig.instance("shop").await.instance_id;
    // Just applied: every resource is in sync with what was applied.
    let all = rig.drift_of("shop").await;
    assert_eq!(all.len(), 4, "{all:?}");
    assert!(all.iter().all(|(_, d)| *d == D::InSync), "{all:?}");

    // Drift found on the database.
    let detected = drift_event(rig.tenant, &instance_id, "database", true);
    rig.publish(&detected).await;
    let all = rig.drift_until("shop", "database", D::DriftDetected).await;
    assert_eq!(of(&all, "web"), D::InSync, "{all:?}");

    // Then, each followed by a marker event that is handled after it (one consumer, in
    // order): the same event again; a resolution older than the detection; a detection
    // older than the web's last apply; another tenant's event for this instance.
    rig.publish_again(&detected).await;
    rig.publish(&earlier(
        drift_event(rig.tenant, &instance_id, "database", false),
        Duration::from_secs(600),
    ))
    .await;
    rig.publish(&earlier(
        drift_event(rig.tenant, &instance_id, "web", true),
        Duration::from_secs(600),
    ))
    .await;
    rig.publish(&drift_event(Uuid::new_v4(), &instance_id, "queue", true))
        .await;
    rig.publish(&drift_event(rig.tenant, &instance_id, "network", true))
        .await;
    let all = rig.drift_until("shop", "network", D::DriftDetected).await;
    assert_eq!(of(&all, "database"), D::DriftDetected, "{all:?}");
    assert_eq!(of(&all, "web"), D::InSync, "{all:?}");
    assert_eq!(of(&all, "queue"), D::InSync, "{all:?}");
    // Every event was handled once: the duplicate found its id already processed.
    assert_eq!(
        rig.scalar(&format!(
            "SELECT count(*) FROM processed_events
              WHERE consumer = 'deployments-drift' AND event_id = '{}'",
            detected.event_id
        ))
        .await,
        1
    );

    // A newer resolution clears it.
    rig.publish(&drift_event(rig.tenant, &instance_id, "database", false))
        .await;
    let all = rig.drift_until("shop", "database", D::InSync).await;
    assert_eq!(of(&all, "network"), D::DriftDetected, "{all:?}");

    // A deployment that applies the network again makes it in sync as of then: the drift
    // detected before it no longer shows, and a detection from before it does not bring
    // it back.
    let before = std::time::SystemTime::now();
    let id = rig
        .request(
            "shop",
            pb::DeploymentKind::Deploy,
            r#"{"dns_domain": "corp"}"#,
        )
        .await;
    let d = rig.settled(&id).await;
    assert_eq!(status(&d), S::Succeeded, "{d:#?}");
    let all = rig.drift_of("shop").await;
    assert_eq!(of(&all, "network"), D::InSync, "{all:?}");
    let mut stale = drift_event(rig.tenant, &instance_id, "network", true);
    stale.occurred_at = Some(before.into());
    rig.publish(&stale).await;
    rig.publish(&drift_event(rig.tenant, &instance_id, "queue", true))
        .await;
    let all = rig.drift_until("shop", "queue", D::DriftDetected).await;
    assert_eq!(of(&all, "network"), D::InSync, "{all:?}");
}
