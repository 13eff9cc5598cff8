//! Data key cache: hits skip the key manager; entries leave by age and by count.
#![allow(clippy::unwrap_used)]

mod common;

use std::time::Duration;

use cairn_storage::{DataKeyCache, EncryptionContext, KeyError, KeyManager, LocalKeyFile};

fn ctx(state: &str) -> EncryptionContext {
    EncryptionContext::new("tenant-1", state)
}

#[tokio::test]
async fn second_unwrap_is_served_from_the_cache() {
    let dir = common::temp_dir("cache-hit");
    let manager = LocalKeyFile::open_or_create(dir.join("keys.json")).unwrap();
    let cache = DataKeyCache::new(16, Duration::from_secs(60));
    let data_key = manager.generate_data_key(&ctx("s1")).await.unwrap();

    let first = cache
        .get_or_unwrap(&manager, &data_key.key_id, &data_key.wrapped, &ctx("s1"))
        .await
        .unwrap();
    let second = cache
        .get_or_unwrap(&manager, &data_key.key_id, &data_key.wrapped, &ctx("s1"))
        .await
        .unwrap();
    assert_eq!(first, data_key.plaintext);
    assert_eq!(second, data_key.plaintext);
    assert_eq!(cache.unwrap_calls(), 1);
    assert_eq!(cache.hits(), 1);
    assert_eq!(cache.len(), 1);

    // The context is part of the cache key: a hit never skips the context check.
    let err = cache
        .get_or_unwrap(&manager, &data_key.key_id, &data_key.wrapped, &ctx("s2"))
        .await
        .unwrap_err();
    assert!(err.is_damage(), "{err:?}");
    assert_eq!(cache.unwrap_calls(), 2);
    // Errors are not cached.
    let err = cache
        .get_or_unwrap(&manager, &data_key.key_id, &data_key.wrapped, &ctx("s2"))
        .await
        .unwrap_err();
    assert!(matches!(err, KeyError::InvalidCiphertext { .. }));
    assert_eq!(cache.unwrap_calls(), 3);
    assert_eq!(cache.len(), 1);
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn kms_calls_are_saved() {
    let config = common::moto_config().await;
    let arn = common::create_kms_key(&config).await;
    let manager = cairn_storage::KmsKeyManager::with_config(&config, &arn);
    let cache = DataKeyCache::new(16, Duration::from_secs(60));
    let data_key = manager.generate_data_key(&ctx("s1")).await.unwrap();
    for _ in 0..5 {
        let key = cache
            .get_or_unwrap(&manager, &data_key.key_id, &data_key.wrapped, &ctx("s1"))
            .await
            .unwrap();
        assert_eq!(key, data_key.plaintext);
    }
    assert_eq!(cache.unwrap_calls(), 1);
    assert_eq!(cache.hits(), 4);
}

#[tokio::test]
async fn entries_expire_by_age() {
    let dir = common::temp_dir("cache-age");
    let manager = LocalKeyFile::open_or_create(dir.join("keys.json")).unwrap();
    let cache = DataKeyCache::new(16, Duration::from_millis(200));
    let data_key = manager.generate_data_key(&ctx("s1")).await.unwrap();
    let s1 = ctx("s1");
    let unwrap = || cache.get_or_unwrap(&manager, &data_key.key_id, &data_key.wrapped, &s1);
    unwrap().await.unwrap();
    unwrap().await.unwrap();
    assert_eq!(cache.unwrap_calls(), 1);
    tokio::time::sleep(Duration::from_millis(300)).await;
    unwrap().await.unwrap();
    assert_eq!(cache.unwrap_calls(), 2);
    unwrap().await.unwrap();
    assert_eq!(cache.unwrap_calls(), 2);
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn entries_leave_by_size_oldest_first() {
    let dir = common::temp_dir("cache-size");
    let manager = LocalKeyFile::open_or_create(dir.join("keys.json")).unwrap();
    let cache = DataKeyCache::new(2, Duration::from_secs(60));
    let mut keys = Vec::new();
    for state in ["a", "b", "c"] {
        keys.push((state, manager.generate_data_key(&ctx(state)).await.unwrap()));
    }
    for (state, key) in &keys {
        cache
            .get_or_unwrap(&manager, &key.key_id, &key.wrapped, &ctx(state))
            .await
            .unwrap();
        // Distinct insertion instants, so "oldest" is well defined.
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    assert_eq!(cache.len(), 2);
    assert_eq!(cache.unwrap_calls(), 3);
    // "b" and "c" are cached; "a" was evicted.
    for (state, key) in &keys[1..] {
        cache
            .get_or_unwrap(&manager, &key.key_id, &key.wrapped, &ctx(state))
            .await
            .unwrap();
    }
    assert_eq!(cache.unwrap_calls(), 3);
    let (state, key) = &keys[0];
    cache
        .get_or_unwrap(&manager, &key.key_id, &key.wrapped, &ctx(state))
        .await
        .unwrap();
    assert_eq!(cache.unwrap_calls(), 4);
    assert_eq!(cache.len(), 2);

    // A zero-sized cache never keeps anything.
    let off = DataKeyCache::new(0, Duration::from_secs(60));
    for _ in 0..2 {
        off.get_or_unwrap(&manager, &key.key_id, &key.wrapped, &ctx(state))
            .await
            .unwrap();
    }
    assert_eq!(off.unwrap_calls(), 2);
    assert!(off.is_empty());
    std::fs::remove_dir_all(dir).unwrap();
}
