//! S3 object store against moto: round trips, no overwrite, damage vs unavailable.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use bytes::Bytes;
use cairn_storage::aws::s3_client;
use cairn_storage::{ObjectError, ObjectStore, ObjectVersion, S3ObjectStore};

#[tokio::test]
async fn put_get_list_delete_round_trip() {
    let config = common::moto_config().await;
    let bucket = common::create_bucket(&config, true).await;
    let store: Arc<dyn ObjectStore> =
        Arc::new(S3ObjectStore::with_config(&config, &bucket, "tenant-a/"));
    store.self_check().await.unwrap();

    let first = store
        .put_new("cairn/web.tfstate", Bytes::from_static(b"one"))
        .await
        .unwrap();
    let second = store
        .put_new("cairn/db.tfstate", Bytes::from_static(b"two"))
        .await
        .unwrap();
    assert_eq!(first.key, "cairn/web.tfstate");
    assert!(!first.version_id.is_empty());

    assert_eq!(
        store.get(&first.key, &first.version_id).await.unwrap(),
        Bytes::from_static(b"one")
    );
    assert_eq!(
        store.get(&second.key, &second.version_id).await.unwrap(),
        Bytes::from_static(b"two")
    );

    // The object really lives under the prefix.
    let raw = s3_client(&config)
        .get_object()
        .bucket(&bucket)
        .key("tenant-a/cairn/web.tfstate")
        .send()
        .await
        .unwrap();
    assert_eq!(raw.version_id(), Some(first.version_id.as_str()));

    let mut listed = store.list("cairn/").await.unwrap();
    listed.sort();
    let mut expected = vec![first.clone(), second.clone()];
    expected.sort();
    assert_eq!(listed, expected);
    assert_eq!(store.list("cairn/web").await.unwrap(), vec![first.clone()]);
    assert!(store.list("other/").await.unwrap().is_empty());

    store.delete(&first.key, &first.version_id).await.unwrap();
    // Deleting again is fine.
    store.delete(&first.key, &first.version_id).await.unwrap();
    assert_eq!(store.list("").await.unwrap(), vec![second.clone()]);

    // Once its only version is gone the key can be created again.
    let again = store
        .put_new("cairn/web.tfstate", Bytes::from_static(b"three"))
        .await
        .unwrap();
    assert_ne!(again.version_id, first.version_id);
}

#[tokio::test]
async fn list_follows_pagination() {
    let config = common::moto_config().await;
    let bucket = common::create_bucket(&config, true).await;
    let store = S3ObjectStore::with_config(&config, &bucket, "pre").with_list_page_size(2);
    // Several versions of one key (written around the store, which never overwrites) so
    // that pages end in the middle of a key and the version marker matters.
    let client = s3_client(&config);
    let mut expected = Vec::new();
    for key in ["multi", "multi", "multi", "single", "z/1", "z/2", "z/3"] {
        let out = client
            .put_object()
            .bucket(&bucket)
            .key(format!("pre/{key}"))
            .body(Bytes::from_static(b"v").into())
            .send()
            .await
            .unwrap();
        expected.push(ObjectVersion {
            key: key.to_owned(),
            version_id: out.version_id().unwrap().to_owned(),
        });
    }
    // Outside the prefix: never listed.
    client
        .put_object()
        .bucket(&bucket)
        .key("elsewhere")
        .send()
        .await
        .unwrap();
    let mut listed = store.list("").await.unwrap();
    listed.sort();
    expected.sort();
    assert_eq!(listed, expected);
    assert_eq!(store.list("z/").await.unwrap().len(), 3);
}

#[tokio::test]
async fn put_new_never_overwrites() {
    let config = common::moto_config().await;
    let bucket = common::create_bucket(&config, true).await;
    let store = S3ObjectStore::with_config(&config, &bucket, "p");
    let first = store
        .put_new("a.tfstate", Bytes::from_static(b"original"))
        .await
        .unwrap();
    let err = store
        .put_new("a.tfstate", Bytes::from_static(b"replacement"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ObjectError::AlreadyExists { key } if key == "a.tfstate"),
        "{err:?}"
    );
    assert!(!err.is_damage());
    assert_eq!(
        store.get("a.tfstate", &first.version_id).await.unwrap(),
        Bytes::from_static(b"original")
    );
    assert_eq!(store.list("").await.unwrap().len(), 1);
}

#[tokio::test]
async fn missing_object_or_version_is_damage() {
    let config = common::moto_config().await;
    let bucket = common::create_bucket(&config, true).await;
    let store = S3ObjectStore::with_config(&config, &bucket, "");

    // A key that never existed.
    let version = store
        .put_new("present", Bytes::from_static(b"x"))
        .await
        .unwrap();
    let err = store
        .get("never-written", &version.version_id)
        .await
        .unwrap_err();
    assert!(matches!(err, ObjectError::NotFound { .. }), "{err:?}");
    assert!(err.is_damage());

    // A version that was deleted while another version of the key remains.
    let client = s3_client(&config);
    let newer = client
        .put_object()
        .bucket(&bucket)
        .key("present")
        .body(Bytes::from_static(b"y").into())
        .send()
        .await
        .unwrap();
    assert!(newer.version_id().is_some());
    store.delete("present", &version.version_id).await.unwrap();
    let err = store.get("present", &version.version_id).await.unwrap_err();
    assert!(
        matches!(&err, ObjectError::NotFound { key, version_id } if key == "present" && *version_id == version.version_id),
        "{err:?}"
    );
    assert!(err.is_damage());
    assert!(err.to_string().contains("does not exist"), "{err}");

    // The only version of a key deleted.
    let lonely = store
        .put_new("lonely", Bytes::from_static(b"z"))
        .await
        .unwrap();
    store.delete("lonely", &lonely.version_id).await.unwrap();
    let err = store.get("lonely", &lonely.version_id).await.unwrap_err();
    assert!(err.is_damage(), "{err:?}");
}

#[tokio::test]
async fn self_check_requires_versioning() {
    let config = common::moto_config().await;
    let bucket = common::create_bucket(&config, false).await;
    let store = S3ObjectStore::with_config(&config, &bucket, "");
    let err = store.self_check().await.unwrap_err();
    assert!(
        matches!(&err, ObjectError::VersioningNotEnabled { bucket: b, .. } if *b == bucket),
        "{err:?}"
    );
    assert!(!err.is_damage());
    let text = err.to_string();
    assert!(text.contains("versioning"), "{text}");
    assert!(text.contains(&bucket), "{text}");

    // A write into an unversioned bucket is refused too (no version id to record).
    let err = store
        .put_new("x", Bytes::from_static(b"x"))
        .await
        .unwrap_err();
    assert!(
        matches!(err, ObjectError::VersioningNotEnabled { .. }),
        "{err:?}"
    );
}

#[tokio::test]
async fn missing_bucket_is_unavailable() {
    let config = common::moto_config().await;
    let bucket = common::unique_bucket();
    let store = S3ObjectStore::with_config(&config, &bucket, "");

    let err = store.self_check().await.unwrap_err();
    assert!(matches!(err, ObjectError::Unavailable(_)), "{err:?}");
    assert!(!err.is_damage());
    let text = err.to_string();
    assert!(
        text.contains(&bucket) && text.contains("does not exist"),
        "{text}"
    );

    // Reading from a missing bucket must never look like a missing object.
    let err = store.get("k", "some-version").await.unwrap_err();
    assert!(!err.is_damage(), "{err:?}");
    assert!(err.to_string().contains("does not exist"), "{err}");
    let err = store.list("").await.unwrap_err();
    assert!(!err.is_damage(), "{err:?}");
    let err = store.delete("k", "some-version").await.unwrap_err();
    assert!(!err.is_damage(), "{err:?}");
}

#[tokio::test]
async fn closed_port_is_unavailable() {
    let store = S3ObjectStore::with_settings(&common::closed_port_settings(), "bucket", "").await;
    for err in [
        store.self_check().await.unwrap_err(),
        store.get("k", "v").await.unwrap_err(),
        store
            .put_new("k", Bytes::from_static(b"x"))
            .await
            .unwrap_err(),
        store.delete("k", "v").await.unwrap_err(),
        store.list("").await.unwrap_err(),
    ] {
        assert!(matches!(err, ObjectError::Unavailable(_)), "{err:?}");
        assert!(!err.is_damage());
        let text = err.to_string();
        assert!(
            text.contains("S3 unreachable") && text.contains("connection refused"),
            "{text}"
        );
    }
}

#[tokio::test]
async fn invalid_keys_are_refused() {
    let config = common::moto_config().await;
    let store = S3ObjectStore::with_config(&config, "unused", "");
    // The last one: the file store's reservation holds on S3 too, so a key scheme that
    // only the file store would refuse fails here as well.
    for key in [
        "",
        "/abs",
        "a//b",
        "a/../b",
        "trailing/",
        ".hidden",
        "plans/s/0123456789abcdef0123456789abcdef",
    ] {
        let err = store
            .put_new(key, Bytes::from_static(b"x"))
            .await
            .unwrap_err();
        assert!(
            matches!(err, ObjectError::InvalidKey { .. }),
            "{key}: {err:?}"
        );
        assert!(!err.is_damage());
    }
}

#[tokio::test]
async fn parse_url_builds_working_stores() {
    let dir = common::temp_dir("url");
    let url = format!("file://{}", dir.display());
    let store = cairn_storage::parse_object_store_url(&url, None)
        .await
        .unwrap();
    store.self_check().await.unwrap();
    assert_eq!(store.describe(), url);

    let store = cairn_storage::parse_object_store_url("s3://bucket/some/prefix", None)
        .await
        .unwrap();
    assert_eq!(store.describe(), "s3://bucket/some/prefix/");

    for bad in ["s3:///prefix", "file://relative", "http://x", "/plain/path"] {
        let err = cairn_storage::parse_object_store_url(bad, None)
            .await
            .err()
            .unwrap();
        assert!(matches!(err, ObjectError::Config(_)), "{bad}: {err:?}");
    }
    std::fs::remove_dir_all(dir).unwrap();
}

/// How S3 failures that moto cannot produce are classified (fault injector answering like
/// AWS S3).
#[tokio::test]
async fn s3_answers_are_classified() {
    let xml = |code: &str| {
        format!(
            "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>{code}</Code><Message>canned {code}</Message></Error>"
        )
    };
    let cases: [(u16, &str, &str); 4] = [
        (403, "AccessDenied", "S3 access denied"),
        (503, "SlowDown", "S3 throttled"),
        (500, "InternalError", "S3 server error"),
        (404, "NoSuchBucket", "does not exist"),
    ];
    for (status, code, text) in cases {
        let endpoint = common::fault_server(status, "application/xml", &xml(code)).await;
        let store =
            S3ObjectStore::with_settings(&common::settings_for(endpoint), "bucket", "p").await;
        for err in [
            store.get("k", "v").await.unwrap_err(),
            store.list("").await.unwrap_err(),
            store.self_check().await.unwrap_err(),
            store.delete("k", "v").await.unwrap_err(),
            store
                .put_new("k", Bytes::from_static(b"x"))
                .await
                .unwrap_err(),
        ] {
            assert!(
                matches!(err, ObjectError::Unavailable(_)),
                "{code}: {err:?}"
            );
            assert!(!err.is_damage(), "{code}: {err:?}");
            assert!(err.to_string().contains(text), "{code}: {err}");
        }
    }
    // S3 saying the key or version does not exist is damage.
    for code in ["NoSuchKey", "NoSuchVersion"] {
        let endpoint = common::fault_server(404, "application/xml", &xml(code)).await;
        let store =
            S3ObjectStore::with_settings(&common::settings_for(endpoint), "bucket", "").await;
        let err = store.get("k", "v").await.unwrap_err();
        assert!(
            matches!(err, ObjectError::NotFound { .. }),
            "{code}: {err:?}"
        );
        store.delete("k", "v").await.unwrap();
    }
    // A bare 404 (a proxy or a wrong endpoint, not S3) proves nothing about the data.
    let endpoint = common::fault_server(404, "text/html", "<html>not here</html>").await;
    let store = S3ObjectStore::with_settings(&common::settings_for(endpoint), "bucket", "").await;
    let err = store.get("k", "v").await.unwrap_err();
    assert!(matches!(err, ObjectError::Unavailable(_)), "{err:?}");
    let err = store.delete("k", "v").await.unwrap_err();
    assert!(matches!(err, ObjectError::Unavailable(_)), "{err:?}");
}
