//! A bucket (versioned) and a KMS key of its own per test in the S3 + KMS emulator, and SDK
//! configuration with static credentials for the services under test.
use aws_config::{BehaviorVersion, Region, SdkConfig};
use aws_sdk_kms::types::{KeySpec, KeyUsageType};
use aws_sdk_s3::config::{Credentials, SharedCredentialsProvider};
use aws_sdk_s3::error::DisplayErrorContext;
use aws_sdk_s3::types::{BucketVersioningStatus, VersioningConfiguration};

use crate::env;

/// The region the emulator is used with.
pub const REGION: &str = "us-east-1";
/// The static access key id and secret the emulator accepts.
pub const ACCESS_KEY: &str = "test";
/// See [`ACCESS_KEY`].
pub const SECRET_KEY: &str = "test";

/// SDK configuration for the emulator at `endpoint`: static credentials, region us-east-1,
/// no lookups of the environment or profile files. S3 clients built from it additionally
/// need `force_path_style(true)` (see [`s3_client_for`]).
pub fn sdk_config_for(endpoint: &str) -> SdkConfig {
    let credentials = Credentials::new(ACCESS_KEY, SECRET_KEY, None, None, "cairn-testkit");
    SdkConfig::builder()
        .behavior_version(BehaviorVersion::latest())
        .endpoint_url(endpoint)
        .region(Region::new(REGION))
        .credentials_provider(SharedCredentialsProvider::new(credentials))
        .build()
}

/// An S3 client for the emulator at `endpoint` (path-style addressing).
pub fn s3_client_for(endpoint: &str) -> aws_sdk_s3::Client {
    let config = aws_sdk_s3::config::Builder::from(&sdk_config_for(endpoint))
        .force_path_style(true)
        .build();
    aws_sdk_s3::Client::from_conf(config)
}

/// A KMS client for the emulator at `endpoint`.
pub fn kms_client_for(endpoint: &str) -> aws_sdk_kms::Client {
    aws_sdk_kms::Client::new(&sdk_config_for(endpoint))
}

/// A test's own bucket (versioning enabled) and symmetric KMS key in the emulator at
/// `CAIRN_TEST_AWS_ENDPOINT`.
#[derive(Debug, Clone)]
pub struct TestAws {
    pub endpoint: String,
    pub bucket: String,
    /// The KMS key id (a UUID in moto).
    pub kms_key_id: String,
    pub region: String,
    pub s3: aws_sdk_s3::Client,
    pub kms: aws_sdk_kms::Client,
}

impl TestAws {
    /// Creates a UUID-named bucket with versioning enabled and a fresh symmetric key.
    /// Panics when the variable is unset or the emulator refuses.
    pub async fn create() -> TestAws {
        let endpoint = env::aws_endpoint();
        let s3 = s3_client_for(&endpoint);
        let kms = kms_client_for(&endpoint);
        let mut aws = TestAws {
            endpoint,
            bucket: String::new(),
            kms_key_id: String::new(),
            region: REGION.to_owned(),
            s3,
            kms,
        };
        aws.bucket = aws.create_bucket_without_versioning().await;
        let versioning = VersioningConfiguration::builder()
            .status(BucketVersioningStatus::Enabled)
            .build();
        if let Err(err) = aws
            .s3
            .put_bucket_versioning()
            .bucket(&aws.bucket)
            .versioning_configuration(versioning)
            .send()
            .await
        {
            panic!(
                "enable versioning on bucket {}: {}",
                aws.bucket,
                DisplayErrorContext(err)
            );
        }
        aws.kms_key_id = aws.create_key().await;
        aws
    }

    /// SDK configuration for this emulator; see [`sdk_config_for`].
    pub fn sdk_config(&self) -> SdkConfig {
        sdk_config_for(&self.endpoint)
    }

    /// Creates another UUID-named bucket, without versioning, and returns its name (for
    /// tests of what a service does with an unversioned bucket).
    pub async fn create_bucket_without_versioning(&self) -> String {
        let bucket = format!("cairn-t-{}", uuid::Uuid::new_v4().simple());
        if let Err(err) = self.s3.create_bucket().bucket(&bucket).send().await {
            panic!(
                "create bucket {bucket} at {} ({}): {}",
                self.endpoint,
                env::AWS_ENDPOINT_VAR,
                DisplayErrorContext(err)
            );
        }
        bucket
    }

    /// Creates another symmetric encrypt/decrypt key and returns its id.
    pub async fn create_key(&self) -> String {
        let created = self
            .kms
            .create_key()
            .key_spec(KeySpec::SymmetricDefault)
            .key_usage(KeyUsageType::EncryptDecrypt)
            .description("cairn test key")
            .send()
            .await;
        let key_id = match created {
            Ok(out) => out.key_metadata.map(|meta| meta.key_id),
            Err(err) => panic!(
                "create a KMS key at {} ({}): {}",
                self.endpoint,
                env::AWS_ENDPOINT_VAR,
                DisplayErrorContext(err)
            ),
        };
        match key_id {
            Some(id) if !id.is_empty() => id,
            _ => panic!("the emulator's CreateKey reply has no key id"),
        }
    }
}
