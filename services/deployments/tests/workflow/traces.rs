//! Traces (issue 15): with an OTLP exporter installed, one deployment is one trace, from
//! CreateDeployment through the deployment job, the run requests, RegisterRun and the
//! runner's tofu commands; the coordinator's backend spans (tofu sends no trace headers)
//! link to it.
//!
//! The rig runs every service in this process under the one tracer provider this test
//! installs, so every span carries the same `service.name`. What the shared trace id proves
//! is the propagation: a request span is started by its server's connection task and a
//! message span by its consumer's loop, neither of which is inside the caller's span, so the
//! only way either joins the trace is the `traceparent` it was sent (gRPC metadata, NATS
//! headers, the message outbox's columns, the coordinator's runs row). What it does not
//! prove: per-process resource attributes, and exporting from separate binaries.
use cairn_proto::deployments as pb;
use cairn_testkit::{OtlpReceiver, ReceivedSpan};

use crate::helpers::PARAMS;
use crate::rig::*;

fn path_ends(span: &ReceivedSpan, suffix: &str) -> bool {
    span.name == "request" && span.attribute("path").is_some_and(|p| p.ends_with(suffix))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_spans_of_one_deployment_share_a_trace_id() {
    let receiver = OtlpReceiver::start().await;
    receiver.install("cairn-test");
    let rig = rig(Opts::default()).await;
    rig.create_instance("shop", "staging", PARAMS).await;
    let id = rig.request("shop", pb::DeploymentKind::Deploy, "").await;
    let d = rig.settled(&id).await;
    assert_eq!(status(&d), pb::DeploymentStatus::Succeeded, "{d:#?}");

    let trace_of_create = |spans: &[ReceivedSpan]| {
        spans
            .iter()
            .find(|s| path_ends(s, "/CreateDeployment"))
            .map(|s| s.trace_id.clone())
    };
    // Everything below ended before the deployment settled; wait for its export.
    let spans = receiver
        .wait_for("the deployment's tofu applies in its trace", |spans| {
            trace_of_create(spans).is_some_and(|trace| {
                spans
                    .iter()
                    .filter(|s| {
                        s.trace_id == trace
                            && s.name == "tofu"
                            && s.attribute("command") == Some("apply")
                    })
                    .count()
                    >= 4
            })
        })
        .await;
    let trace = trace_of_create(&spans).unwrap();
    let create = spans
        .iter()
        .find(|s| path_ends(s, "/CreateDeployment"))
        .unwrap();
    assert!(
        create.parent_span_id.is_empty(),
        "the test's call starts the trace"
    );
    // Only the deployment makes jobs, run requests and runs: all of them are in its trace.
    let in_trace = |what: &dyn Fn(&ReceivedSpan) -> bool| {
        spans
            .iter()
            .filter(|s| what(s))
            .all(|s| s.trace_id == trace)
            && spans.iter().any(what)
    };
    // gRPC: CreateDeployment's calls to templates (create_instance made its own, in a trace
    // of its own), each a child of a span of the deployments service.
    let templates: Vec<&ReceivedSpan> = spans
        .iter()
        .filter(|s| {
            s.trace_id == trace
                && s.name == "request"
                && s.attribute("path")
                    .is_some_and(|p| p.starts_with("/cairn.templates."))
        })
        .collect();
    assert!(!templates.is_empty(), "no templates call in the trace");
    for call in templates {
        assert!(
            spans.iter().any(|s| s.span_id == call.parent_span_id),
            "{call:?}"
        );
    }
    // The message outbox and NATS: the job and the run requests are handled in the trace.
    assert!(in_trace(&|s| s.name == "deployment_job"), "deployment_job");
    assert!(in_trace(&|s| s.name == "run_request"), "run_request");
    // gRPC from deployments (which registers each run before requesting it).
    assert!(in_trace(&|s| path_ends(s, "/RegisterRun")), "RegisterRun");
    // The coordinator's backend spans link to the trace of their run's RegisterRun.
    let backend: Vec<&ReceivedSpan> = spans
        .iter()
        .filter(|s| s.name == "state_handler" || s.name == "lock_handler")
        .collect();
    assert!(!backend.is_empty(), "no backend spans");
    for span in backend {
        assert!(span.linked_trace_ids.contains(&trace), "{span:?}");
    }
}
