//! Credential registry entries whose values live in AWS Secrets Manager (moto at
//! `CAIRN_TEST_AWS_ENDPOINT`): a registered ARN resolves to its value; a missing secret, a
//! binary secret and an unreachable secret manager fail with errors that hold no value; a
//! reference of another tenant or target is refused before any lookup; a malformed ARN fails
//! when the registry is loaded.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use anyhow::Context;
use aws_sdk_secretsmanager::error::DisplayErrorContext;
use aws_sdk_secretsmanager::primitives::Blob;
use cairn_runner::credentials::{CredentialError, CredentialRegistry, RegistryError};
use cairn_runner::secrets::{AwsSecretManager, SecretError, SecretFuture, SecretManager};

/// Runner variables are not used by these entries except `T1_KEY`.
fn runner_env(name: &str) -> Option<String> {
    (name == "T1_KEY").then(|| "AKIA-FROM-ENV".to_owned())
}

fn endpoint() -> String {
    cairn_testkit::env::aws_endpoint()
}

fn client() -> aws_sdk_secretsmanager::Client {
    aws_sdk_secretsmanager::Client::new(&cairn_testkit::sdk_config_for(&endpoint()))
}

fn manager() -> AwsSecretManager {
    AwsSecretManager::new(&cairn_testkit::sdk_config_for(&endpoint()))
}

fn canary() -> String {
    format!("canary-{}", uuid::Uuid::new_v4().simple())
}

/// Creates a string secret with a fresh name and returns its ARN.
async fn create_string_secret(value: &str) -> anyhow::Result<String> {
    let name = format!("cairn-t-{}", uuid::Uuid::new_v4().simple());
    let out = client()
        .create_secret()
        .name(&name)
        .secret_string(value)
        .send()
        .await
        .map_err(|e| anyhow::anyhow!("{}", DisplayErrorContext(e)))
        .with_context(|| format!("create secret {name}"))?;
    out.arn.context("moto returned no ARN")
}

/// A registry with one entry per `(tenant, target, reference, vars)`.
fn registry(
    entries: &[(&str, &str, &str, serde_json::Value)],
) -> anyhow::Result<CredentialRegistry> {
    let entries: Vec<_> = entries
        .iter()
        .map(|(tenant, target, reference, vars)| {
            serde_json::json!({"tenant_id": tenant, "target_id": target,
                "reference": reference, "vars": vars})
        })
        .collect();
    Ok(CredentialRegistry::parse(
        &serde_json::json!({ "entries": entries }).to_string(),
    )?)
}

/// The real secret manager, counting its lookups.
struct Counting {
    inner: AwsSecretManager,
    calls: AtomicUsize,
}

impl SecretManager for Counting {
    fn fetch<'a>(&'a self, arn: &'a str) -> SecretFuture<'a> {
        self.calls.fetch_add(1, Ordering::SeqCst);
        self.inner.fetch(arn)
    }
}

#[tokio::test]
async fn a_registered_arn_resolves_to_the_secret_value() -> anyhow::Result<()> {
    let value = canary();
    let arn = create_string_secret(&value).await?;
    let r = registry(&[
        (
            "t1",
            "aws",
            "deploy",
            serde_json::json!({"AWS_ACCESS_KEY_ID": {"env": "T1_KEY"},
                "AWS_SECRET_ACCESS_KEY": {"secret_manager_arn": arn}}),
        ),
        (
            "t1",
            "aws",
            "db-password",
            serde_json::json!({"VALUE": {"secret_manager_arn": arn}}),
        ),
    ])?
    .with_secret_manager(Arc::new(manager()));

    let vars = r.resolve_with("t1", "aws", "deploy", runner_env).await?;
    let got: Vec<(&str, &str)> = vars.iter().map(|(k, v)| (k.as_str(), v.expose())).collect();
    assert_eq!(
        got,
        [
            ("AWS_ACCESS_KEY_ID", "AKIA-FROM-ENV"),
            ("AWS_SECRET_ACCESS_KEY", value.as_str())
        ]
    );
    assert!(!format!("{vars:?}").contains(&value));

    // A sensitive variable's single-value entry.
    let v = r
        .resolve_value_with("t1", "aws", "db-password", runner_env)
        .await?;
    assert_eq!(v.expose(), value);
    assert!(!format!("{v:?}").contains(&value));
    Ok(())
}

#[tokio::test]
async fn an_unknown_arn_is_not_found_and_the_error_holds_no_value() -> anyhow::Result<()> {
    // A real secret exists beside the missing one: its value must not leak into the error.
    let value = canary();
    let existing = create_string_secret(&value).await?;
    let missing = format!(
        "{}-missing-{}",
        existing.rsplit_once(':').map_or("", |(head, _)| head),
        uuid::Uuid::new_v4().simple()
    );
    let r = registry(&[
        (
            "t1",
            "aws",
            "deploy",
            serde_json::json!({"TOKEN": {"secret_manager_arn": missing}}),
        ),
        (
            "t1",
            "aws",
            "ok",
            serde_json::json!({"TOKEN": {"secret_manager_arn": existing}}),
        ),
    ])?
    .with_secret_manager(Arc::new(manager()));

    let err = r
        .resolve_with("t1", "aws", "deploy", runner_env)
        .await
        .expect_err("a missing secret resolved");
    assert!(
        matches!(
            &err,
            CredentialError::SecretRefused { reference, source: SecretError::NotFound { arn } }
                if reference == "deploy" && *arn == missing
        ),
        "{err:?}"
    );
    assert!(!err.is_transient());
    let chain = err.chain();
    assert!(chain.contains("\"deploy\""), "{chain}");
    assert!(chain.contains("does not exist"), "{chain}");
    for text in [err.to_string(), chain, format!("{err:?}")] {
        assert!(!text.contains(&value), "{text}");
    }
    // The existing one still resolves with the same client.
    let ok = r.resolve_with("t1", "aws", "ok", runner_env).await?;
    assert_eq!(ok[0].1.expose(), value);
    Ok(())
}

#[tokio::test]
async fn other_tenants_and_targets_are_refused_before_any_lookup() -> anyhow::Result<()> {
    let value = canary();
    let arn = create_string_secret(&value).await?;
    let counting = Arc::new(Counting {
        inner: manager(),
        calls: AtomicUsize::new(0),
    });
    let r = registry(&[
        (
            "t1",
            "aws",
            "deploy",
            serde_json::json!({"TOKEN": {"secret_manager_arn": arn}}),
        ),
        (
            "t2",
            "gcp",
            "other",
            serde_json::json!({"TOKEN": {"env": "T1_KEY"}}),
        ),
    ])?
    .with_secret_manager(counting.clone());

    for (tenant, target, reference) in [
        ("t2", "aws", "deploy"),     // another tenant
        ("t1", "gcp", "deploy"),     // another target
        ("t2", "gcp", "deploy"),     // both
        ("t1", "aws", arn.as_str()), // the ARN itself as a reference
    ] {
        let err = r
            .resolve_with(tenant, target, reference, runner_env)
            .await
            .expect_err("resolved for the wrong tenant or target");
        assert!(
            matches!(err, CredentialError::NotRegistered { .. }),
            "{tenant}/{target}/{reference}: {err}"
        );
        let err = r
            .resolve_value_with(tenant, target, reference, runner_env)
            .await
            .expect_err("resolved for the wrong tenant or target");
        assert!(
            matches!(err, CredentialError::NotRegistered { .. }),
            "{err}"
        );
    }
    assert_eq!(counting.calls.load(Ordering::SeqCst), 0);

    let vars = r.resolve_with("t1", "aws", "deploy", runner_env).await?;
    assert_eq!(vars[0].1.expose(), value);
    assert_eq!(counting.calls.load(Ordering::SeqCst), 1);
    Ok(())
}

#[tokio::test]
async fn a_binary_secret_is_refused() -> anyhow::Result<()> {
    let name = format!("cairn-t-{}", uuid::Uuid::new_v4().simple());
    let bytes = canary().into_bytes();
    let arn = client()
        .create_secret()
        .name(&name)
        .secret_binary(Blob::new(bytes.clone()))
        .send()
        .await
        .map_err(|e| anyhow::anyhow!("{}", DisplayErrorContext(e)))?
        .arn
        .context("moto returned no ARN")?;
    let r = registry(&[(
        "t1",
        "aws",
        "cert",
        serde_json::json!({"TLS_KEY": {"secret_manager_arn": arn}}),
    )])?
    .with_secret_manager(Arc::new(manager()));

    let err = r
        .resolve_with("t1", "aws", "cert", runner_env)
        .await
        .expect_err("a binary secret resolved");
    assert!(
        matches!(
            &err,
            CredentialError::SecretRefused {
                source: SecretError::Binary { .. },
                ..
            }
        ),
        "{err:?}"
    );
    let chain = err.chain();
    assert!(chain.contains("binary"), "{chain}");
    let canary = String::from_utf8(bytes)?;
    assert!(!chain.contains(&canary) && !format!("{err:?}").contains(&canary));
    Ok(())
}

#[tokio::test]
async fn an_unreachable_secret_manager_is_a_transient_error() -> anyhow::Result<()> {
    // Nothing listens on port 1; retries are off so the test does not wait out backoffs.
    let config = cairn_testkit::sdk_config_for(&endpoint())
        .to_builder()
        .retry_config(aws_config::retry::RetryConfig::disabled())
        .build();
    let unreachable = AwsSecretManager::with_endpoint(&config, Some("http://127.0.0.1:1"));
    let r = registry(&[(
        "t1",
        "aws",
        "deploy",
        serde_json::json!({"TOKEN": {"secret_manager_arn":
            "arn:aws:secretsmanager:us-east-1:123456789012:secret:cairn-unreachable"}}),
    )])?
    .with_secret_manager(Arc::new(unreachable));

    let err = r
        .resolve_with("t1", "aws", "deploy", runner_env)
        .await
        .expect_err("resolved without a secret manager");
    assert!(
        matches!(
            &err,
            CredentialError::SecretManagerTransient {
                source: SecretError::Unavailable { .. },
                ..
            }
        ),
        "{err:?}"
    );
    assert!(err.is_transient());
    Ok(())
}

#[test]
fn a_malformed_arn_fails_when_the_registry_is_loaded() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    for bad in [
        "secret:db",
        "arn:aws:ssm:us-east-1:123456789012:parameter/db",
        "arm:aws:secretsmanager:us-east-1:123456789012:secret:db",
    ] {
        let path = dir.path().join("credentials.json");
        std::fs::write(
            &path,
            serde_json::json!({"entries": [
                {"tenant_id": "t1", "target_id": "aws", "reference": "ok",
                 "vars": {"A": {"env": "T1_KEY"}}},
                {"tenant_id": "t1", "target_id": "aws", "reference": "db",
                 "vars": {"PASSWORD": {"secret_manager_arn": bad}}}]})
            .to_string(),
        )?;
        let err = CredentialRegistry::load(&path).expect_err("a malformed ARN was accepted");
        assert!(
            matches!(&err, RegistryError::Invalid { index: 1, problem } if problem.contains("PASSWORD")),
            "{bad}: {err}"
        );
    }
    Ok(())
}
