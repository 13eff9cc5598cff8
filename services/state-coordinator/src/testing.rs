//! For tests of this and other crates (feature `testing`): the coordinator's settings on a
//! test's own database, NATS prefix, bucket, KMS key and signing keys, so that every harness
//! that starts a coordinator in-process starts the same one and tweaks only what it tests.

use std::time::Duration;

use cairn_db::TestDatabase;
use cairn_testkit::{TestAws, TestKeys, TestNats};
use tonic::transport::Channel;

use crate::{Config, Server};

/// Loopback listeners on free ports, the test's S3 bucket and KMS key (AWS endpoints come
/// with the `Edges` the caller builds), a one-minute run lease, hour-long TTLs that never
/// fire during a test, and the production data-key cache.
pub fn test_config(db: &TestDatabase, nats: &TestNats, aws: &TestAws, keys: &TestKeys) -> Config {
    let loopback = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
    Config {
        database_url: db.runtime_url.clone(),
        database_migrate_url: Some(db.migrate_url.clone()),
        database_schema: "state".to_owned(),
        nats_url: nats.url.clone(),
        nats_prefix: Some(nats.prefix.clone()),
        grpc_addr: loopback,
        http_addr: loopback,
        public_http_url: None,
        object_store: format!("s3://{}/cairn-test", aws.bucket),
        s3_endpoint: None,
        kms_key: aws.kms_key_id.clone(),
        kms_endpoint: None,
        jwt_public_keys_file: keys.jwks_path().to_owned(),
        run_lease: Duration::from_secs(60),
        max_state_bytes: 8 * 1024 * 1024,
        max_plan_bytes: 64 * 1024 * 1024,
        plan_ttl: Duration::from_secs(3600),
        pending_ttl: Duration::from_secs(3600),
        intermediate_retention: Duration::from_secs(3600),
        sweep_interval: Duration::from_secs(3600),
        key_cache_size: 1024,
        key_cache_ttl: Duration::from_secs(300),
        after_restore: false,
    }
}

/// A connected gRPC channel to `server`; panics (it is for tests) when it cannot connect.
pub async fn grpc_channel(server: &Server) -> Channel {
    let url = format!("http://{}", server.grpc_addr());
    match Channel::from_shared(url.clone()) {
        Ok(endpoint) => match endpoint.connect().await {
            Ok(channel) => channel,
            Err(e) => panic!("connect to the coordinator at {url}: {e}"),
        },
        Err(e) => panic!("coordinator URL {url}: {e}"),
    }
}
