//! An OTLP collector over TLS whose certificate the client TLS settings do not trust
//! (`CAIRN_TLS_CA` is another CA): the exporter's handshake fails, the collector receives
//! nothing, and the process carries on (a failed export drops its spans, nothing more). (Its
//! own test binary: the exporter is installed once per process.)
#![allow(clippy::unwrap_used, clippy::expect_used)]

use cairn_service::SharedArgs;
use cairn_testkit::{OtlpReceiver, TestCa};
use clap::Parser;

#[derive(Parser)]
struct Cli {
    #[command(flatten)]
    shared: SharedArgs,
}

#[tokio::test]
async fn a_collector_signed_by_another_ca_receives_nothing() {
    let receiver = OtlpReceiver::start_tls(&TestCa::new("collector-ca").server(), None).await;
    let dir = cairn_testkit::temp_dir();
    let wrong_ca = dir.path().join("ca.pem");
    std::fs::write(&wrong_ca, TestCa::new("another-ca").pem()).unwrap();
    let endpoint = receiver.endpoint();
    let cli = Cli::try_parse_from([
        "x",
        "--otlp-endpoint",
        &endpoint,
        "--tls-ca",
        &wrong_ca.display().to_string(),
    ])
    .unwrap();
    let export = cli.shared.otlp_export().unwrap();
    cairn_telemetry::init_with_otlp("traces-wrong-ca", export).unwrap();

    for attempt in 0..2 {
        tracing::info_span!("not_trusted", attempt).in_scope(|| tracing::info!("inside"));
        // The batch exporter has tried (and failed) by the time a flush returns.
        cairn_telemetry::trace::flush().await;
    }
    assert!(
        receiver.spans().is_empty(),
        "an untrusted collector received {:?}",
        receiver.spans()
    );
    // The exporter failing did not take the process down: a plain call still works, and
    // spans are still made (and dropped).
    tracing::info_span!("after_the_failure").in_scope(|| tracing::info!("still running"));
    cairn_telemetry::trace::flush().await;
    assert!(receiver.spans().is_empty());
}
