//! JWK Set parsing, export and loading from a file.
#![allow(clippy::unwrap_used)]

mod common;

use cairn_auth::{AuthError, KeySet, SigningKey, jwks_json};
use common::b64;
use serde_json::json;

fn okp(kid: &str, x: &str) -> serde_json::Value {
    json!({ "kty": "OKP", "crv": "Ed25519", "kid": kid, "x": x })
}

fn parse(v: serde_json::Value) -> Result<KeySet, AuthError> {
    KeySet::from_jwks_json(&v.to_string())
}

#[test]
fn exported_jwks_has_the_expected_shape_and_parses() {
    let a = SigningKey::generate("a").unwrap();
    let b = SigningKey::generate("b").unwrap();
    let text = jwks_json(&[a.clone(), b.clone()]);
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    let keys = doc["keys"].as_array().unwrap();
    assert_eq!(keys.len(), 2);
    assert_eq!(keys[0]["kty"], "OKP");
    assert_eq!(keys[0]["crv"], "Ed25519");
    assert_eq!(keys[0]["alg"], "EdDSA");
    assert_eq!(keys[0]["use"], "sig");
    assert_eq!(keys[0]["kid"], "a");
    assert_eq!(keys[0]["x"], b64(a.public_key()));
    assert!(keys[0].get("d").is_none());
    assert!(!text.contains(&b64(a.pkcs8_der())));

    let set = KeySet::from_jwks_json(&text).unwrap();
    let mut kids: Vec<&str> = set.kids().collect();
    kids.sort_unstable();
    assert_eq!(kids, ["a", "b"]);
    assert!(set.contains("b"));
    assert_eq!(format!("{set:?}"), r#"KeySet { kids: ["a", "b"] }"#);
}

#[test]
fn minimal_okp_keys_without_alg_and_use_are_accepted() {
    let key = SigningKey::generate("m").unwrap();
    let set = parse(json!({ "keys": [okp("m", &b64(key.public_key()))] })).unwrap();
    assert_eq!(set.len(), 1);
}

#[test]
fn bad_key_sets_are_refused() {
    let key = SigningKey::generate("k").unwrap();
    let x = b64(key.public_key());
    let mut private = okp("k", &x);
    private["d"] = json!(b64(&[7u8; 32]));
    let mut rsa = okp("k", &x);
    rsa["kty"] = json!("RSA");
    let mut x25519 = okp("k", &x);
    x25519["crv"] = json!("X25519");
    let mut hs = okp("k", &x);
    hs["alg"] = json!("HS256");
    let mut enc = okp("k", &x);
    enc["use"] = json!("enc");
    let mut no_kid = okp("k", &x);
    no_kid.as_object_mut().unwrap().remove("kid");

    let cases = [
        ("empty", json!({ "keys": [] })),
        ("not a set", json!([okp("k", &x)])),
        (
            "duplicate kid",
            json!({ "keys": [okp("k", &x), okp("k", &x)] }),
        ),
        ("private key", json!({ "keys": [private] })),
        ("rsa", json!({ "keys": [rsa] })),
        ("x25519", json!({ "keys": [x25519] })),
        ("hs256 alg", json!({ "keys": [hs] })),
        ("enc use", json!({ "keys": [enc] })),
        ("no kid", json!({ "keys": [no_kid] })),
        ("empty kid", json!({ "keys": [okp("", &x)] })),
        ("short x", json!({ "keys": [okp("k", &b64(&[1u8; 31]))] })),
        ("x not base64url", json!({ "keys": [okp("k", "***")] })),
        (
            "oct key",
            json!({ "keys": [{ "kty": "oct", "kid": "k", "k": x }] }),
        ),
    ];
    for (name, doc) in cases {
        let err = parse(doc)
            .err()
            .unwrap_or_else(|| panic!("{name} was accepted"));
        assert!(
            matches!(err, AuthError::InvalidKeySet(_)),
            "{name}: {err:?}"
        );
    }
    assert!(matches!(
        KeySet::from_jwks_json("{ not json"),
        Err(AuthError::InvalidKeySet(_))
    ));
}

#[test]
fn load_reads_a_file_and_reports_a_missing_one() {
    let key = SigningKey::generate("file-key").unwrap();
    let dir = std::env::temp_dir().join(format!("cairn-auth-{}", uuid::Uuid::new_v4()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("jwks.json");
    std::fs::write(&path, jwks_json(&[key])).unwrap();

    let set = KeySet::load(&path).unwrap();
    assert!(set.contains("file-key"));

    let missing = dir.join("absent.json");
    let err = KeySet::load(&missing).unwrap_err();
    assert!(
        matches!(&err, AuthError::ReadKeySet { path, .. } if *path == missing),
        "{err:?}"
    );
    std::fs::remove_dir_all(&dir).unwrap();
}
