//! The http backend over TLS, configured as OpenTofu's is (`TF_HTTP_CLIENT_CA_CERTIFICATE_PEM`,
//! `TF_HTTP_CLIENT_CERTIFICATE_PEM`, `TF_HTTP_CLIENT_PRIVATE_KEY_PEM`, else the system
//! roots), against a TLS server with certificates made here: the right CA round-trips the
//! state, a wrong one fails the handshake with Go's verification error (not retried) and
//! nothing reaches the server, mTLS presents the client certificate, and the settings
//! OpenTofu refuses are refused with its words.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use common::mock_backend::Mock;
use common::test_ca::{Ca, server_config};
use common::*;

const CONFIG: &str = r#"
terraform {
  backend "http" {}
}

resource "terraform_data" "a" {
  input = "one"
}

output "a" {
  value = terraform_data.a.output
}
"#;

/// A work directory on `mock`'s backend; `TF_HTTP_RETRY_MAX=3`, so a retried failure would
/// show as 4 attempts. No system roots unless the test sets them.
fn work(mock: &Mock, tls: &[(&str, &str)]) -> Work {
    let mut w = Work::new();
    w.write("main.tf", CONFIG);
    for (k, v) in mock.env() {
        w.set(&k, &v);
    }
    w.set("TF_HTTP_RETRY_MAX", "3");
    let empty = w.path().join("no-roots");
    std::fs::create_dir_all(&empty).unwrap();
    let empty = empty.display().to_string();
    w.set("SSL_CERT_FILE", &format!("{empty}/none.pem"));
    w.set("SSL_CERT_DIR", &empty);
    for (k, v) in tls {
        w.set(k, v);
    }
    w.ok(&["init", "-input=false"], 0);
    w
}

#[test]
fn with_the_servers_ca_the_state_round_trips_over_https() {
    let ca = Ca::new("backend-ca");
    let mock = Mock::start_tls(server_config(&ca.server(), None));
    assert!(mock.base.starts_with("https://127.0.0.1:"));
    let w = work(
        &mock,
        &[("TF_HTTP_CLIENT_CA_CERTIFICATE_PEM", ca.pem().as_str())],
    );
    w.ok(&["apply", "-auto-approve", "-input=false"], 0);
    let seq = mock.sequence();
    assert_eq!(seq.first().unwrap(), "LOCK /state/lock");
    assert!(
        seq.iter().any(|s| s.starts_with("POST /state?ID=")),
        "{seq:?}"
    );
    let written: serde_json::Value =
        serde_json::from_slice(mock.store.lock().unwrap().state.as_ref().unwrap()).unwrap();
    assert_eq!(written["serial"], 1);

    // Read back through the same TLS: the state the server holds.
    let pulled = w.ok(&["state", "pull"], 0).json();
    assert_eq!(pulled["lineage"], written["lineage"]);
    assert_eq!(pulled["serial"], written["serial"]);
    let out = w.ok(&["output", "-raw", "a"], 0);
    assert_eq!(out.stdout, "one");
    w.ok(&["plan", "-detailed-exitcode", "-input=false"], 0);
}

#[test]
fn a_wrong_ca_fails_verification_once_and_writes_nothing() {
    let ca = Ca::new("backend-ca");
    let other = Ca::new("someone-else");
    let mock = Mock::start_tls(server_config(&ca.server(), None));
    let w = work(
        &mock,
        &[("TF_HTTP_CLIENT_CA_CERTIFICATE_PEM", other.pem().as_str())],
    );
    let r = w.ok(&["apply", "-auto-approve", "-input=false"], 1);
    let lock = format!("{}/state/lock", mock.base);
    let want = format!(
        "LOCK {lock} giving up after 1 attempt(s): Lock \"{lock}\": tls: failed to verify certificate: x509: certificate signed by unknown authority"
    );
    assert!(
        r.stderr.contains("Error acquiring the state lock"),
        "{}",
        r.all()
    );
    assert!(r.stderr.contains(&want), "{}", r.all());
    assert!(mock.requests().is_empty(), "{:?}", mock.sequence());
    assert!(mock.store.lock().unwrap().state.is_none());
    assert!(!w.path().join("errored.tfstate").exists());

    // Without a lock address the first request is the GET: the same error.
    let r = w.run(&["plan", "-lock=false", "-input=false"]);
    assert_eq!(r.code, 1, "{}", r.all());
    assert!(
        r.stderr
            .contains("x509: certificate signed by unknown authority"),
        "{}",
        r.all()
    );
    assert!(mock.requests().is_empty());
}

#[test]
fn without_a_ca_the_system_roots_decide() {
    let ca = Ca::new("backend-ca");
    let mock = Mock::start_tls(server_config(&ca.server(), None));
    // No roots at all (a FROM scratch image): nothing verifies.
    let w = work(&mock, &[]);
    let r = w.ok(&["plan", "-input=false"], 1);
    assert!(
        r.stderr.contains(
            "tls: failed to verify certificate: x509: certificate signed by unknown authority"
        ),
        "{}",
        r.all()
    );
    assert!(mock.requests().is_empty());

    // The CA in the system bundle (SSL_CERT_FILE, as Go reads it): verified.
    let mut w = work(&mock, &[]);
    let bundle = w.path().join("bundle.pem");
    std::fs::write(&bundle, ca.pem()).unwrap();
    w.set("SSL_CERT_FILE", &bundle.display().to_string());
    w.ok(&["apply", "-auto-approve", "-input=false"], 0);
    assert!(mock.store.lock().unwrap().state.is_some());
}

#[test]
fn mtls_presents_the_client_certificate_and_without_one_the_server_refuses() {
    let ca = Ca::new("backend-ca");
    let client = ca.client();
    let mock = Mock::start_tls(server_config(&ca.server(), Some(&ca)));
    let w = work(
        &mock,
        &[
            ("TF_HTTP_CLIENT_CA_CERTIFICATE_PEM", ca.pem().as_str()),
            ("TF_HTTP_CLIENT_CERTIFICATE_PEM", client.cert.as_str()),
            ("TF_HTTP_CLIENT_PRIVATE_KEY_PEM", client.key.as_str()),
        ],
    );
    w.ok(&["apply", "-auto-approve", "-input=false"], 0);
    let reqs = mock.requests();
    assert!(!reqs.is_empty());
    assert!(
        reqs.iter().all(|r| r.client_cert),
        "every request over mTLS"
    );
    assert!(mock.store.lock().unwrap().state.is_some());

    // The CA only: the server wants a certificate and refuses the connection.
    let before = mock.requests().len();
    let w = work(
        &mock,
        &[("TF_HTTP_CLIENT_CA_CERTIFICATE_PEM", ca.pem().as_str())],
    );
    let r = w.ok(&["plan", "-input=false"], 1);
    assert!(
        r.stderr.contains("remote error: tls: certificate required"),
        "{}",
        r.all()
    );
    assert_eq!(mock.requests().len(), before, "no request got through");
}

#[test]
fn settings_opentofu_refuses_are_refused_in_its_words() {
    let ca = Ca::new("backend-ca");
    let client = ca.client();
    let mock = Mock::start_tls(server_config(&ca.server(), None));
    for (tls, want) in [
        (
            vec![("TF_HTTP_CLIENT_CERTIFICATE_PEM", client.cert.as_str())],
            "client_certificate_pem is set but client_private_key_pem is not",
        ),
        (
            vec![("TF_HTTP_CLIENT_PRIVATE_KEY_PEM", client.key.as_str())],
            "client_private_key_pem is set but client_certificate_pem is not",
        ),
        (
            vec![("TF_HTTP_CLIENT_CA_CERTIFICATE_PEM", "not a certificate")],
            "failed to append certs",
        ),
        (
            vec![
                ("TF_HTTP_CLIENT_CERTIFICATE_PEM", "garbage"),
                ("TF_HTTP_CLIENT_PRIVATE_KEY_PEM", client.key.as_str()),
            ],
            "cannot load client certificate: tls: failed to find any PEM data in certificate input",
        ),
    ] {
        let w = work(&mock, &tls);
        let r = w.ok(&["plan", "-input=false"], 1);
        assert!(
            r.stderr
                .contains("Failed to configure the backend \"http\""),
            "{}",
            r.all()
        );
        assert!(r.stderr.contains(want), "{want}: {}", r.all());
    }
    assert!(mock.requests().is_empty());
}
