//! KMS key manager against moto: round trip, damage vs unavailable.
#![allow(clippy::unwrap_used)]

mod common;

use std::sync::Arc;

use cairn_storage::aws::kms_client;
use cairn_storage::{EncryptionContext, KeyError, KeyManager, KmsKeyManager};

fn ctx() -> EncryptionContext {
    EncryptionContext::new("tenant-1", "state-1")
}

#[tokio::test]
async fn generate_and_unwrap_round_trip() {
    let config = common::moto_config().await;
    let arn = common::create_kms_key(&config).await;
    let manager: Arc<dyn KeyManager> = Arc::new(KmsKeyManager::with_config(&config, &arn));
    manager.self_check().await.unwrap();

    let data_key = manager.generate_data_key(&ctx()).await.unwrap();
    assert_eq!(data_key.key_id, arn);
    assert!(!data_key.wrapped.is_empty());
    assert_ne!(data_key.wrapped.as_slice(), data_key.plaintext.expose());
    let unwrapped = manager
        .unwrap_data_key(&data_key.key_id, &data_key.wrapped, &ctx())
        .await
        .unwrap();
    assert_eq!(unwrapped, data_key.plaintext);

    // Two data keys differ.
    let other = manager.generate_data_key(&ctx()).await.unwrap();
    assert_ne!(other.plaintext, data_key.plaintext);

    // No key material in Debug output.
    let debug = format!("{data_key:?}");
    assert!(debug.contains("redacted"), "{debug}");
    assert!(!debug.contains(&format!("{:?}", data_key.plaintext.expose())));
}

#[tokio::test]
async fn alias_records_the_key_arn() {
    let config = common::moto_config().await;
    let arn = common::create_kms_key(&config).await;
    let alias = format!("alias/cairn-test-{}", uuid::Uuid::new_v4().simple());
    kms_client(&config)
        .create_alias()
        .alias_name(&alias)
        .target_key_id(&arn)
        .send()
        .await
        .unwrap();
    let manager = KmsKeyManager::with_config(&config, &alias);
    let data_key = manager.generate_data_key(&ctx()).await.unwrap();
    assert_eq!(data_key.key_id, arn);
    let unwrapped = manager
        .unwrap_data_key(&data_key.key_id, &data_key.wrapped, &ctx())
        .await
        .unwrap();
    assert_eq!(unwrapped, data_key.plaintext);
}

#[tokio::test]
async fn wrong_encryption_context_is_damage() {
    let config = common::moto_config().await;
    let arn = common::create_kms_key(&config).await;
    let manager = KmsKeyManager::with_config(&config, &arn);
    let data_key = manager.generate_data_key(&ctx()).await.unwrap();
    for wrong in [
        EncryptionContext::new("tenant-1", "state-2"),
        EncryptionContext::new("tenant-2", "state-1"),
    ] {
        let err = manager
            .unwrap_data_key(&data_key.key_id, &data_key.wrapped, &wrong)
            .await
            .unwrap_err();
        assert!(matches!(err, KeyError::InvalidCiphertext { .. }), "{err:?}");
        assert!(err.is_damage());
    }
}

#[tokio::test]
async fn corrupted_wrapped_key_is_damage() {
    let config = common::moto_config().await;
    let arn = common::create_kms_key(&config).await;
    let manager = KmsKeyManager::with_config(&config, &arn);
    let data_key = manager.generate_data_key(&ctx()).await.unwrap();
    let mut corrupted = data_key.wrapped.clone();
    let last = corrupted.len() - 1;
    corrupted[last] ^= 0x01;
    let err = manager
        .unwrap_data_key(&data_key.key_id, &corrupted, &ctx())
        .await
        .unwrap_err();
    assert!(err.is_damage(), "{err:?}");
}

#[tokio::test]
async fn naming_another_key_is_damage() {
    let config = common::moto_config().await;
    let arn = common::create_kms_key(&config).await;
    let other_arn = common::create_kms_key(&config).await;
    let manager = KmsKeyManager::with_config(&config, &arn);
    let data_key = manager.generate_data_key(&ctx()).await.unwrap();
    let err = manager
        .unwrap_data_key(&other_arn, &data_key.wrapped, &ctx())
        .await
        .unwrap_err();
    assert!(
        matches!(
            err,
            KeyError::IncorrectKey { .. } | KeyError::InvalidCiphertext { .. }
        ),
        "{err:?}"
    );
    assert!(err.is_damage());
}

/// moto 5.1 keeps using a disabled key (it never answers DisabledException), so this test
/// asks a fault injector that answers like AWS KMS does for a disabled key.
#[tokio::test]
async fn disabled_key_is_unavailable() {
    let endpoint = common::fault_server(
        400,
        "application/x-amz-json-1.1",
        r#"{"__type":"DisabledException","message":"arn:aws:kms:us-east-1:123456789012:key/k is disabled."}"#,
    )
    .await;
    let manager =
        KmsKeyManager::with_settings(&common::settings_for(endpoint), "alias/cairn").await;
    for err in [
        manager
            .unwrap_data_key("arn:aws:kms:us-east-1:123456789012:key/k", &[7; 64], &ctx())
            .await
            .unwrap_err(),
        manager.generate_data_key(&ctx()).await.unwrap_err(),
        manager.self_check().await.unwrap_err(),
    ] {
        assert!(matches!(err, KeyError::Unavailable(_)), "{err:?}");
        assert!(!err.is_damage());
        assert!(err.to_string().contains("is disabled"), "{err}");
    }
}

/// How each KMS answer is classified, with the answers AWS KMS gives (fault injector).
#[tokio::test]
async fn kms_answers_are_classified() {
    let cases: [(u16, &str, bool, &str); 7] = [
        (
            400,
            "IncorrectKeyException",
            true,
            "not encrypted under key",
        ),
        (400, "InvalidCiphertextException", true, "does not decrypt"),
        (400, "AccessDeniedException", false, "KMS access denied"),
        (400, "ThrottlingException", false, "KMS throttled"),
        (500, "KeyUnavailableException", false, "is unavailable"),
        (500, "KMSInternalException", false, "KMS server error"),
        (
            400,
            "KMSInvalidStateException",
            false,
            "not in a usable state",
        ),
    ];
    for (status, code, damage, text) in cases {
        let body = format!(r#"{{"__type":"{code}","message":"canned {code}"}}"#);
        let endpoint = common::fault_server(status, "application/x-amz-json-1.1", &body).await;
        let manager =
            KmsKeyManager::with_settings(&common::settings_for(endpoint), "alias/cairn").await;
        let err = manager
            .unwrap_data_key("arn:aws:kms:us-east-1:123456789012:key/k", &[7; 64], &ctx())
            .await
            .unwrap_err();
        assert_eq!(err.is_damage(), damage, "{code}: {err:?}");
        assert!(err.to_string().contains(text), "{code}: {err}");
        assert!(err.to_string().contains(code), "{code}: {err}");
    }
}

#[tokio::test]
async fn missing_key_is_unavailable() {
    let config = common::moto_config().await;
    let manager = KmsKeyManager::with_config(&config, uuid::Uuid::new_v4().to_string());
    let err = manager.generate_data_key(&ctx()).await.unwrap_err();
    assert!(matches!(err, KeyError::Unavailable(_)), "{err:?}");
    assert!(err.to_string().contains("not found"), "{err}");
}

#[tokio::test]
async fn closed_port_is_unavailable() {
    let manager =
        KmsKeyManager::with_settings(&common::closed_port_settings(), "alias/anything").await;
    for err in [
        manager.generate_data_key(&ctx()).await.unwrap_err(),
        manager
            .unwrap_data_key("alias/anything", &[1, 2, 3], &ctx())
            .await
            .unwrap_err(),
        manager.self_check().await.unwrap_err(),
    ] {
        assert!(matches!(err, KeyError::Unavailable(_)), "{err:?}");
        assert!(!err.is_damage());
        let text = err.to_string();
        assert!(
            text.contains("KMS unreachable: connection refused"),
            "{text}"
        );
    }
}
