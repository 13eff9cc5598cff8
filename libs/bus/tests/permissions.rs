//! The permission matrix enforced by a real nats-server of the test's own, configured with
//! `server_config` and one nkey user per role (seed files as `cairn-tenancy nats
//! credentials` writes them): the admin sets up the streams, every service connects and
//! checks them, and per role one allowed action succeeds while attempts outside its
//! permissions are refused by the server ("Permissions Violation") and change nothing.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::time::Duration;

use async_nats::jetstream;
use async_nats::{Event, ServerError};
use cairn_bus::{
    Consumer, Namespace, NatsCredentials, NatsUser, ServiceRole, StreamKind, StreamSettings,
};
use cairn_proto::events::Event as DomainEvent;
use cairn_testkit::NatsServer;
use tokio::sync::mpsc;

/// The server, the namespace, and each role's seed file.
struct Rig {
    server: NatsServer,
    ns: Namespace,
    creds: BTreeMap<ServiceRole, PathBuf>,
    _dir: tempfile::TempDir,
}

impl Rig {
    async fn start() -> Rig {
        let ns = Namespace::root();
        let dir = tempfile::tempdir().unwrap();
        let mut users = Vec::new();
        let mut creds = BTreeMap::new();
        for role in ServiceRole::ALL {
            let (seed_file, public_key) = cairn_bus::new_user(role).unwrap();
            let path = dir.path().join(format!("{role}.creds"));
            std::fs::write(&path, seed_file).unwrap();
            creds.insert(role, path);
            users.push(NatsUser { role, public_key });
        }
        let server = NatsServer::start(&cairn_bus::server_config(&ns, &users)).await;
        Rig {
            server,
            ns,
            creds,
            _dir: dir,
        }
    }

    fn credentials(&self, role: ServiceRole) -> NatsCredentials {
        NatsCredentials::load(&self.creds[&role]).unwrap()
    }

    /// `role`'s connection (as services connect) and the server errors it is told about.
    async fn connect(&self, role: ServiceRole) -> Conn {
        let (tx, rx) = mpsc::unbounded_channel();
        let client = cairn_bus::connect_options(role, Some(&self.credentials(role)))
            .unwrap()
            .event_callback(move |event| {
                let tx = tx.clone();
                async move {
                    if let Event::ServerError(ServerError::Other(text)) = event {
                        let _ = tx.send(text);
                    }
                }
            })
            .connect(&self.server.url)
            .await
            .unwrap();
        let js = jetstream::ContextBuilder::new()
            .timeout(Duration::from_secs(2))
            .build(client.clone());
        Conn {
            role,
            client,
            js,
            errors: rx,
        }
    }

    async fn admin(&self) -> jetstream::Context {
        jetstream::new(
            cairn_bus::connect_as(
                &self.server.url,
                ServiceRole::Admin,
                Some(&self.credentials(ServiceRole::Admin)),
            )
            .await
            .unwrap(),
        )
    }

    async fn messages(&self, admin: &jetstream::Context, kind: StreamKind) -> u64 {
        let mut stream = admin.get_stream(self.ns.stream_name(kind)).await.unwrap();
        stream.info().await.unwrap().state.messages
    }
}

struct Conn {
    role: ServiceRole,
    client: async_nats::Client,
    js: jetstream::Context,
    errors: mpsc::UnboundedReceiver<String>,
}

impl Conn {
    /// Waits until the server reports a permissions violation naming `subject`.
    async fn refused(&mut self, what: &str, subject: &str) {
        let wanted = format!("\"{subject}\"");
        let found = tokio::time::timeout(Duration::from_secs(20), async {
            while let Some(text) = self.errors.recv().await {
                if text.contains("Permissions Violation") && text.contains(&wanted) {
                    return true;
                }
            }
            false
        })
        .await;
        assert_eq!(
            found,
            Ok(true),
            "{}: {what} on {subject} was not refused",
            self.role
        );
    }

    async fn publish_event(&self, ns: &Namespace, aggregate: &str, event: &str) -> bool {
        let e = DomainEvent {
            event_id: uuid::Uuid::now_v7().to_string(),
            tenant_id: "t1".into(),
            aggregate: aggregate.into(),
            aggregate_id: "a1".into(),
            event_type: event.into(),
            ..Default::default()
        };
        cairn_bus::publish_event(&self.js, ns, &e).await.is_ok()
    }

    async fn publish(&self, subject: &str) -> bool {
        let msg = DomainEvent::default();
        let id = uuid::Uuid::now_v7().to_string();
        cairn_bus::publish_msg(&self.js, subject, &id, &msg)
            .await
            .is_ok()
    }
}

#[tokio::test]
async fn each_role_is_held_to_its_subjects() {
    let rig = Rig::start().await;
    let ns = rig.ns.clone();

    // A service cannot create the streams; before the setup step its check names the
    // missing stream and the setup command.
    let missing = cairn_bus::connect(
        &rig.server.url,
        ns.clone(),
        ServiceRole::StateCoordinator,
        Some(&rig.credentials(ServiceRole::StateCoordinator)),
    )
    .await
    .err()
    .expect("no streams yet");
    let text = missing.to_string();
    assert!(
        text.contains("CAIRN_EVENTS") && text.contains(cairn_bus::SETUP_COMMAND),
        "{text}"
    );
    let mut runner = rig.connect(ServiceRole::Runner).await;
    let config = cairn_bus::stream_config(&ns, &StreamSettings::default(), StreamKind::Events);
    assert!(runner.js.create_stream(config).await.is_err());
    runner
        .refused("create a stream", "$JS.API.STREAM.CREATE.CAIRN_EVENTS")
        .await;

    // The admin sets them up; every service then connects and checks its own.
    let admin = rig.admin().await;
    cairn_bus::setup_streams(&admin, &ns, &StreamSettings::default())
        .await
        .unwrap();
    for role in ServiceRole::ALL {
        cairn_bus::connect(
            &rig.server.url,
            ns.clone(),
            role,
            Some(&rig.credentials(role)),
        )
        .await
        .unwrap_or_else(|e| panic!("{role} cannot connect: {e}"));
    }

    // Runner: consumes its run queue, publishes results and logs, subscribes to cancels;
    // never publishes other events, run requests, or consumes events.
    assert!(runner.publish(&ns.runres("r1").unwrap()).await);
    assert!(runner.publish(&ns.runlog("r1").unwrap()).await);
    assert!(runner.publish_event(&ns, "target", "validated").await);
    let events_before = rig.messages(&admin, StreamKind::Events).await;
    assert!(!runner.publish_event(&ns, "state", "recovered").await);
    runner
        .refused("publish", "cairn.events.t1.state.recovered")
        .await;
    assert!(!runner.publish(&ns.runq("tgt").unwrap()).await);
    runner.refused("publish", "cairn.runq.tgt").await;
    assert!(!runner.publish(&ns.runq_validate("tgt").unwrap()).await);
    runner.refused("publish", "cairn.runq.tgt.validate").await;
    assert_eq!(
        rig.messages(&admin, StreamKind::Events).await,
        events_before
    );
    assert_eq!(rig.messages(&admin, StreamKind::RunQ).await, 0);
    let filter = ns.events_filter(None, None, None).unwrap();
    assert!(
        Consumer::new(
            &runner.js,
            &ns.events_stream(),
            "snoop",
            &filter,
            Duration::from_secs(5)
        )
        .await
        .is_err()
    );
    runner
        .refused(
            "create a consumer",
            "$JS.API.CONSUMER.CREATE.CAIRN_EVENTS.snoop.cairn.events.>",
        )
        .await;

    // Deployments: enqueues a run request and a job, cancels a run, states its events; the
    // runner receives both the request (through its consumer) and the cancel. It may not
    // ask for a target validation, nor state another service's events.
    let mut deployments = rig.connect(ServiceRole::Deployments).await;
    assert!(
        deployments
            .publish_event(&ns, "deployment", "requested")
            .await
    );
    assert!(deployments.publish_event(&ns, "instance", "created").await);
    assert!(
        !deployments
            .publish_event(&ns, "instance", "drift_detected")
            .await
    );
    deployments
        .refused("publish", "cairn.events.t1.instance.drift_detected")
        .await;
    assert!(!deployments.publish_event(&ns, "state", "recovered").await);
    deployments
        .refused("publish", "cairn.events.t1.state.recovered")
        .await;
    assert!(!deployments.publish(&ns.runq_validate("tgt").unwrap()).await);
    deployments
        .refused("publish", "cairn.runq.tgt.validate")
        .await;
    let mut cancels = runner.client.subscribe(ns.runctl_filter()).await.unwrap();
    runner.client.flush().await.unwrap();
    assert!(deployments.publish(&ns.runq("tgt").unwrap()).await);
    assert!(deployments.publish(&ns.deployq()).await);
    cairn_bus::publish_core(
        &deployments.client,
        &ns.runctl("r1").unwrap(),
        &DomainEvent::default(),
    )
    .await
    .unwrap();
    let cancel = tokio::time::timeout(
        Duration::from_secs(20),
        futures::StreamExt::next(&mut cancels),
    )
    .await
    .unwrap()
    .unwrap();
    assert_eq!(cancel.subject.as_str(), ns.runctl("r1").unwrap());
    let queue = Consumer::new(
        &runner.js,
        &ns.runq_stream(),
        "runner-tgt",
        &ns.runq("tgt").unwrap(),
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    let never = tokio_util::sync::CancellationToken::new();
    let request = tokio::time::timeout(Duration::from_secs(20), queue.next_message(&never))
        .await
        .unwrap()
        .unwrap()
        .unwrap();
    request.ack().await.unwrap();
    assert_eq!(request.subject.as_str(), ns.runq("tgt").unwrap());
    // … but may not delete a stream, nor listen to the cancels meant for runners.
    assert!(
        deployments
            .js
            .delete_stream(ns.events_stream())
            .await
            .is_err()
    );
    deployments
        .refused("delete a stream", "$JS.API.STREAM.DELETE.CAIRN_EVENTS")
        .await;
    let _sub = deployments
        .client
        .subscribe(ns.runctl_filter())
        .await
        .unwrap();
    deployments.refused("subscribe", "cairn.runctl.*").await;
    admin.get_stream(ns.events_stream()).await.unwrap();

    // Tenancy: publishes its events and target validation requests, which the runner's
    // second consumer of the target receives (its filter does not overlap the run
    // requests'); never run requests, the runner's answer, jobs, run results, or cancels.
    let mut tenancy = rig.connect(ServiceRole::Tenancy).await;
    assert!(tenancy.publish_event(&ns, "tenant", "created").await);
    assert!(tenancy.publish_event(&ns, "target", "created").await);
    assert!(tenancy.publish(&ns.runq_validate("tgt").unwrap()).await);
    let validations = Consumer::new(
        &runner.js,
        &ns.runq_stream(),
        "validator-tgt",
        &ns.runq_validate("tgt").unwrap(),
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    let validation =
        tokio::time::timeout(Duration::from_secs(20), validations.next_message(&never))
            .await
            .unwrap()
            .unwrap()
            .unwrap();
    validation.ack().await.unwrap();
    assert_eq!(
        validation.subject.as_str(),
        ns.runq_validate("tgt").unwrap()
    );
    assert!(!tenancy.publish(&ns.runq("tgt").unwrap()).await);
    tenancy.refused("publish", "cairn.runq.tgt").await;
    assert!(!tenancy.publish_event(&ns, "target", "validated").await);
    tenancy
        .refused("publish", "cairn.events.t1.target.validated")
        .await;
    assert!(!tenancy.publish_event(&ns, "deployment", "requested").await);
    tenancy
        .refused("publish", "cairn.events.t1.deployment.requested")
        .await;
    assert!(!tenancy.publish(&ns.deployq()).await);
    tenancy.refused("publish", "cairn.deployq").await;
    assert!(!tenancy.publish(&ns.runres("r1").unwrap()).await);
    tenancy.refused("publish", "cairn.runres.r1").await;

    // The coordinator publishes events only.
    let mut coordinator = rig.connect(ServiceRole::StateCoordinator).await;
    assert!(coordinator.publish_event(&ns, "state", "fenced").await);
    assert!(!coordinator.publish(&ns.runq("tgt").unwrap()).await);
    coordinator.refused("publish", "cairn.runq.tgt").await;
    assert!(
        !coordinator
            .publish_event(&ns, "deployment", "succeeded")
            .await
    );
    coordinator
        .refused("publish", "cairn.events.t1.deployment.succeeded")
        .await;

    // Drift: run requests and its events, and reads run results; never jobs, nor purges.
    let mut drift = rig.connect(ServiceRole::Drift).await;
    assert!(drift.publish(&ns.runq("tgt").unwrap()).await);
    assert!(drift.publish_event(&ns, "instance", "drift_detected").await);
    assert!(!drift.publish_event(&ns, "state", "recovered").await);
    drift
        .refused("publish", "cairn.events.t1.state.recovered")
        .await;
    assert!(!drift.publish_event(&ns, "instance", "updated").await);
    drift
        .refused("publish", "cairn.events.t1.instance.updated")
        .await;
    assert!(!drift.publish(&ns.runq_validate("tgt").unwrap()).await);
    drift.refused("publish", "cairn.runq.tgt.validate").await;
    Consumer::new(
        &drift.js,
        &ns.runres_stream(),
        "drift-results",
        &ns.stream_subject(StreamKind::RunRes),
        Duration::from_secs(30),
    )
    .await
    .unwrap();
    assert!(!drift.publish(&ns.deployq()).await);
    drift.refused("publish", "cairn.deployq").await;
    let runres = drift.js.get_stream(ns.runres_stream()).await.unwrap();
    assert!(runres.purge().await.is_err());
    drift
        .refused("purge a stream", "$JS.API.STREAM.PURGE.CAIRN_RUNRES")
        .await;
    assert_eq!(rig.messages(&admin, StreamKind::RunRes).await, 1);

    // No service reads another's inbox.
    let _peek = drift
        .client
        .subscribe("_INBOX_deployments.>")
        .await
        .unwrap();
    drift.refused("subscribe", "_INBOX_deployments.>").await;

    // The server logs what it refused (what the end-to-end test looks for).
    let log = rig.server.log();
    assert!(log.contains("Publish Violation"), "{log}");
    assert!(log.contains("Subscription Violation"), "{log}");
}
