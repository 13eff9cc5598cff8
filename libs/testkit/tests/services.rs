//! Smoke tests of the per-test resources against the running PostgreSQL, NATS and moto,
//! including each of them reached through a fault proxy that cuts and heals.
#![allow(clippy::unwrap_used)]

use std::time::Duration;

use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::BucketVersioningStatus;
use cairn_testkit::{Fault, FaultProxy, TestAws, connect_nats, fresh_database, s3_client_for};
use sqlx::{Connection, PgConnection};
use tokio::time::timeout;

const PATIENCE: Duration = Duration::from_secs(30);

#[tokio::test]
async fn fresh_database_gives_distinct_databases_with_working_roles() {
    let a = fresh_database().await;
    let b = fresh_database().await;
    assert_ne!(a.name, b.name);
    for url in [&a.migrate_url, &a.runtime_url, &a.admin_url] {
        let mut conn = PgConnection::connect(url).await.unwrap();
        let (db,): (String,) = sqlx::query_as("SELECT current_database()")
            .fetch_one(&mut conn)
            .await
            .unwrap();
        assert_eq!(db, a.name);
    }
    let mut runtime = PgConnection::connect(&a.runtime_url).await.unwrap();
    let (user,): (String,) = sqlx::query_as("SELECT current_user::text")
        .fetch_one(&mut runtime)
        .await
        .unwrap();
    assert_eq!(user, a.runtime_role);
}

#[tokio::test]
async fn postgres_through_the_proxy_fails_when_cut_and_recovers_when_healed() {
    let db = fresh_database().await;
    let proxy = FaultProxy::start_for_url(&db.migrate_url).await.unwrap();
    let url = proxy.url_for(&db.migrate_url);
    let mut conn = PgConnection::connect(&url).await.unwrap();
    sqlx::query("SELECT 1").execute(&mut conn).await.unwrap();

    proxy.set(Fault::Cut);
    let cut = timeout(PATIENCE, sqlx::query("SELECT 1").execute(&mut conn)).await;
    assert!(cut.unwrap().is_err(), "query succeeded through a cut proxy");
    let refused = timeout(PATIENCE, PgConnection::connect(&url)).await;
    assert!(refused.unwrap().is_err(), "connected through a cut proxy");

    proxy.heal();
    let mut again = PgConnection::connect(&url).await.unwrap();
    sqlx::query("SELECT 1").execute(&mut again).await.unwrap();
}

/// The names of the streams `prefix` has on the server (either case), seen by `observer`.
async fn streams_of(observer: &cairn_testkit::TestNats, prefix: &str) -> Vec<String> {
    use futures::TryStreamExt;
    let upper = prefix.to_ascii_uppercase();
    let names: Vec<String> = observer
        .jetstream
        .stream_names()
        .try_collect()
        .await
        .unwrap();
    names
        .into_iter()
        .filter(|n| n.starts_with(prefix) || n.starts_with(&upper))
        .collect()
}

#[tokio::test]
async fn a_prefix_streams_go_when_its_last_clone_is_dropped() {
    let observer = cairn_testkit::connect_nats_without_streams().await;
    let nats = connect_nats().await;
    let prefix = nats.prefix.clone();
    let clone = nats.clone();
    assert_eq!(streams_of(&observer, &prefix).await.len(), 5);
    drop(nats);
    // A clone still holds the prefix: nothing deleted yet.
    assert_eq!(streams_of(&observer, &prefix).await.len(), 5);
    drop(clone);
    assert_eq!(streams_of(&observer, &prefix).await, Vec::<String>::new());
}

#[tokio::test]
async fn nats_prefix_namespaces_streams_and_they_can_be_deleted() {
    let nats = connect_nats().await;
    let other = cairn_testkit::connect_nats_without_streams().await;
    assert_ne!(nats.prefix, other.prefix);
    let stream = nats
        .jetstream
        .create_stream(async_nats::jetstream::stream::Config {
            name: nats.stream_name("events"),
            subjects: vec![nats.subject("events.>")],
            ..Default::default()
        })
        .await
        .unwrap();
    nats.jetstream
        .publish(nats.subject("events.created"), "hello".into())
        .await
        .unwrap()
        .await
        .unwrap();
    let msg = stream.get_raw_message(1).await.unwrap();
    assert_eq!(msg.subject.as_str(), nats.subject("events.created"));
    assert_eq!(&msg.payload[..], b"hello");

    assert_eq!(other.delete_streams().await, 0);
    // Its own stream and the five Cairn streams connect_nats set up.
    assert_eq!(nats.delete_streams().await, 6);
    assert!(
        nats.jetstream
            .get_stream(nats.stream_name("events"))
            .await
            .is_err()
    );
}

#[tokio::test]
async fn nats_through_the_proxy_reconnects_after_heal() {
    let nats = connect_nats().await;
    let proxy = FaultProxy::start_for_url(&nats.url).await.unwrap();
    let client = async_nats::ConnectOptions::new()
        .connection_timeout(Duration::from_secs(2))
        .connect(proxy.url_for(&nats.url))
        .await
        .unwrap();
    client.flush().await.unwrap();

    proxy.set(Fault::Cut);
    let subject = nats.subject("ping");
    let mut sub = nats.client.subscribe(subject.clone()).await.unwrap();
    nats.client.flush().await.unwrap();
    // While cut, a request through the proxy cannot be answered.
    let cut = timeout(Duration::from_secs(2), client.flush()).await;
    assert!(!matches!(cut, Ok(Ok(()))), "flushed through a cut proxy");

    proxy.heal();
    // The client reconnects on its own; a message published through the proxy arrives.
    timeout(PATIENCE, async {
        loop {
            if client.publish(subject.clone(), "pong".into()).await.is_ok()
                && client.flush().await.is_ok()
            {
                break;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("the client reconnected through the healed proxy");
    use futures::StreamExt;
    let got = timeout(PATIENCE, sub.next()).await.unwrap().unwrap();
    assert_eq!(&got.payload[..], b"pong");
}

#[tokio::test]
async fn test_aws_has_a_versioned_bucket_and_a_working_key() {
    let aws = TestAws::create().await;
    let versioning = aws
        .s3
        .get_bucket_versioning()
        .bucket(&aws.bucket)
        .send()
        .await
        .unwrap();
    assert_eq!(versioning.status, Some(BucketVersioningStatus::Enabled));

    for body in ["one", "two"] {
        aws.s3
            .put_object()
            .bucket(&aws.bucket)
            .key("k")
            .body(ByteStream::from_static(body.as_bytes()))
            .send()
            .await
            .unwrap();
    }
    let versions = aws
        .s3
        .list_object_versions()
        .bucket(&aws.bucket)
        .send()
        .await
        .unwrap();
    assert_eq!(versions.versions().len(), 2);

    let encrypted = aws
        .kms
        .encrypt()
        .key_id(&aws.kms_key_id)
        .plaintext(aws_sdk_kms::primitives::Blob::new(b"secret".to_vec()))
        .send()
        .await
        .unwrap();
    let decrypted = aws
        .kms
        .decrypt()
        .ciphertext_blob(encrypted.ciphertext_blob.unwrap())
        .send()
        .await
        .unwrap();
    assert_eq!(decrypted.plaintext.unwrap().as_ref(), b"secret");

    let plain = aws.create_bucket_without_versioning().await;
    assert_ne!(plain, aws.bucket);
    let versioning = aws
        .s3
        .get_bucket_versioning()
        .bucket(&plain)
        .send()
        .await
        .unwrap();
    assert_eq!(versioning.status, None);
    assert_ne!(aws.create_key().await, aws.kms_key_id);
    assert_eq!(aws.sdk_config().region().unwrap().as_ref(), "us-east-1");
}

#[tokio::test]
async fn s3_through_the_proxy_fails_when_cut_and_recovers_when_healed() {
    let aws = TestAws::create().await;
    let proxy = FaultProxy::start_for_url(&aws.endpoint).await.unwrap();
    let s3 = s3_client_for(&proxy.url_for(&aws.endpoint));
    s3.head_bucket().bucket(&aws.bucket).send().await.unwrap();

    // The client now holds a pooled connection; cutting must fail the next call anyway.
    proxy.set(Fault::Cut);
    let cut = timeout(PATIENCE, s3.head_bucket().bucket(&aws.bucket).send()).await;
    assert!(
        cut.unwrap().is_err(),
        "S3 call succeeded through a cut proxy"
    );

    proxy.set(Fault::Reset);
    let reset = timeout(PATIENCE, s3.head_bucket().bucket(&aws.bucket).send()).await;
    assert!(
        reset.unwrap().is_err(),
        "S3 call succeeded through a reset proxy"
    );

    proxy.heal();
    s3.head_bucket().bucket(&aws.bucket).send().await.unwrap();
}
