//! Spans reach an OTLP collector over TLS: the exporter libs/service builds from the shared
//! settings (`CAIRN_OTLP_ENDPOINT=https://…`, `CAIRN_TLS_CA`, `CAIRN_TLS_CLIENT_CERT`/`_KEY`)
//! verifies the collector with the CA and presents the client certificate it requires. (Its
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
async fn spans_reach_a_tls_collector_verified_with_the_ca_presenting_the_client_certificate() {
    let ca = TestCa::new("otlp-ca");
    // The collector requires a client certificate signed by the same CA (mTLS).
    let receiver = OtlpReceiver::start_tls(&ca.server(), Some(&ca.pem())).await;
    assert!(receiver.endpoint().starts_with("https://"));
    let dir = cairn_testkit::temp_dir();
    let file = |name: &str, text: String| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).unwrap();
        path.display().to_string()
    };
    let client = ca.client();
    let (ca_file, cert_file, key_file) = (
        file("ca.pem", ca.pem()),
        file("client.crt", client.cert),
        file("client.key", client.key),
    );
    let endpoint = receiver.endpoint();
    let cli = Cli::try_parse_from([
        "x",
        "--otlp-endpoint",
        &endpoint,
        "--tls-ca",
        &ca_file,
        "--tls-client-cert",
        &cert_file,
        "--tls-client-key",
        &key_file,
    ])
    .unwrap();
    let export = cli.shared.otlp_export().unwrap();
    cairn_telemetry::init_with_otlp("traces-tls", export).unwrap();
    assert!(cairn_telemetry::trace::enabled());

    tracing::info_span!("exported_over_tls", case = "right CA").in_scope(|| {
        tracing::info!("inside");
    });
    let spans = receiver
        .wait_for("the span exported over TLS", |spans| {
            spans.iter().any(|s| s.name == "exported_over_tls")
        })
        .await;
    let span = spans
        .iter()
        .find(|s| s.name == "exported_over_tls")
        .unwrap();
    assert_eq!(span.service, "traces-tls");
    assert_eq!(span.attribute("case"), Some("right CA"));
}
