//! Shared helpers for the storage tests: moto settings, fresh buckets and keys, temp dirs.
#![allow(dead_code, clippy::unwrap_used)]

use std::path::PathBuf;

use aws_config::SdkConfig;
use aws_sdk_s3::types::{BucketVersioningStatus, VersioningConfiguration};
use cairn_storage::aws::{AwsSettings, s3_client, sdk_config};

/// Settings for moto at `CAIRN_TEST_AWS_ENDPOINT`, with static credentials so the tests do
/// not depend on the process environment.
pub fn moto_settings() -> AwsSettings {
    let endpoint = std::env::var("CAIRN_TEST_AWS_ENDPOINT").expect(
        "set CAIRN_TEST_AWS_ENDPOINT to a moto server (e.g. http://127.0.0.1:55000) to run the storage tests",
    );
    AwsSettings::with_static_credentials(endpoint, "us-east-1", "test", "test")
}

pub async fn moto_config() -> SdkConfig {
    sdk_config(&moto_settings()).await
}

/// Settings pointing at a local port nobody listens on.
pub fn closed_port_settings() -> AwsSettings {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    drop(listener);
    AwsSettings::with_static_credentials(
        format!("http://127.0.0.1:{port}"),
        "us-east-1",
        "test",
        "test",
    )
}

pub fn unique_bucket() -> String {
    format!("cairn-test-{}", uuid::Uuid::new_v4().simple())
}

/// Creates a bucket, with versioning enabled when `versioned`.
pub async fn create_bucket(config: &SdkConfig, versioned: bool) -> String {
    let bucket = unique_bucket();
    let client = s3_client(config);
    client.create_bucket().bucket(&bucket).send().await.unwrap();
    if versioned {
        client
            .put_bucket_versioning()
            .bucket(&bucket)
            .versioning_configuration(
                VersioningConfiguration::builder()
                    .status(BucketVersioningStatus::Enabled)
                    .build(),
            )
            .send()
            .await
            .unwrap();
    }
    bucket
}

/// Creates a symmetric KMS key and returns its ARN.
pub async fn create_kms_key(config: &SdkConfig) -> String {
    let client = cairn_storage::aws::kms_client(config);
    let out = client
        .create_key()
        .description("cairn-storage test key")
        .send()
        .await
        .unwrap();
    out.key_metadata().unwrap().arn().unwrap().to_owned()
}

/// A fresh directory under the system temp dir (removed by the caller when it cares).
pub fn temp_dir(label: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!(
        "cairn-storage-{label}-{}",
        uuid::Uuid::new_v4().simple()
    ));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// A fault injector: an HTTP endpoint that answers every request with one canned response,
/// the way AWS answers in a failure we cannot provoke in moto (moto never reports a
/// disabled key, throttling or access denied). The SDK parses these responses for real.
/// Returns the endpoint URL; the server lives as long as the test's runtime.
pub async fn fault_server(status: u16, content_type: &str, body: &str) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};

    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let endpoint = format!("http://{}", listener.local_addr().unwrap());
    let response = format!(
        "HTTP/1.1 {status} Canned\r\ncontent-type: {content_type}\r\ncontent-length: {}\r\nx-amzn-requestid: fault-injector\r\nconnection: close\r\n\r\n{body}",
        body.len()
    );
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let response = response.clone();
            tokio::spawn(async move {
                // Read the request head and its body (content-length) before answering.
                let mut request = Vec::new();
                let mut buf = [0u8; 4096];
                let head_end = loop {
                    let Ok(n) = socket.read(&mut buf).await else {
                        return;
                    };
                    if n == 0 {
                        return;
                    }
                    request.extend_from_slice(&buf[..n]);
                    if let Some(pos) = request.windows(4).position(|w| w == b"\r\n\r\n") {
                        break pos + 4;
                    }
                };
                let head = String::from_utf8_lossy(&request[..head_end]).to_ascii_lowercase();
                let body_len: usize = head
                    .lines()
                    .find_map(|line| line.strip_prefix("content-length:"))
                    .and_then(|v| v.trim().parse().ok())
                    .unwrap_or(0);
                while request.len() < head_end + body_len {
                    match socket.read(&mut buf).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => request.extend_from_slice(&buf[..n]),
                    }
                }
                let _ = socket.write_all(response.as_bytes()).await;
                let _ = socket.shutdown().await;
            });
        }
    });
    endpoint
}

/// Static-credential settings for a fault server's endpoint; one retry, so canned
/// throttling and server errors do not slow the tests down.
pub fn settings_for(endpoint: String) -> AwsSettings {
    let mut settings = AwsSettings::with_static_credentials(endpoint, "us-east-1", "test", "test");
    settings.max_attempts = Some(2);
    settings
}
