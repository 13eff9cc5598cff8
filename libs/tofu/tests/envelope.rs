//! OpenTofu native state encryption envelopes: only serial and lineage are visible.
#![allow(clippy::unwrap_used)]

mod common;

use cairn_tofu::{DocumentKind, StateDocument, StateError, StateHeader, StateV4, inspect_state};
use serde_json::{Value, json};

/// The fixture envelope with the serial and lineage that OpenTofu copies out of the
/// plaintext state, and `meta` as real OpenTofu writes it (base64 of the provider's JSON).
fn envelope(serial: Value, lineage: Value) -> Value {
    let mut envelope = common::read_json(&common::fixture(
        "encryption/init-encryption-with-state/terraform.tfstate",
    ));
    let fields = envelope.as_object_mut().unwrap();
    fields.insert("serial".into(), serial);
    fields.insert("lineage".into(), lineage);
    fields.insert(
        "meta".into(),
        json!({"key_provider.pbkdf2.main": "eyJzYWx0IjoiWm1GclpYTmhiSFE9IiwiaXRlcmF0aW9ucyI6NjAwMDAwfQ=="}),
    );
    envelope
}

fn bytes(value: &Value) -> Vec<u8> {
    serde_json::to_vec(value).unwrap()
}

#[test]
fn envelope_exposes_serial_and_lineage_only() {
    let sample = envelope(json!(42), json!("3f1c6a0e-2b7d-4c59-9a43-8d2f6e1b7c05"));
    let document = inspect_state(&bytes(&sample)).unwrap();
    let header = StateHeader {
        serial: 42,
        lineage: "3f1c6a0e-2b7d-4c59-9a43-8d2f6e1b7c05".into(),
        version: None,
    };
    assert_eq!(document, StateDocument::Encrypted(header.clone()));
    assert!(document.is_encrypted());
    assert_eq!(document.header(), &header);
    assert!(document.outputs().is_empty());
    assert!(document.public_outputs().is_empty());
}

#[test]
fn wire_format_from_the_http_backend_page_is_recognised() {
    // Field order and compact form as tofu sends it, with a trailing newline.
    let body = b"{\"serial\":7,\"lineage\":\"a-lineage\",\"meta\":{\"key_provider.aws_kms.k\":\"e30=\"},\"encrypted_data\":\"AAECAwQFBgcICQ==\",\"encryption_version\":\"v0\"}\n";
    let document = inspect_state(body).unwrap();
    assert_eq!(
        document.header(),
        &StateHeader {
            serial: 7,
            lineage: "a-lineage".into(),
            version: None
        }
    );
    assert!(document.is_encrypted());
}

#[test]
fn fixture_envelope_without_pass_through_fields_has_no_serial() {
    // The fixture is hand-made in the older layout: no serial, no lineage, `meta` an object.
    let raw = common::read(&common::fixture(
        "encryption/init-encryption-with-state/terraform.tfstate",
    ));
    assert_eq!(
        inspect_state(&raw),
        Err(StateError::MissingSerial {
            kind: DocumentKind::Encrypted
        })
    );
    assert_eq!(StateV4::from_slice(&raw), Err(StateError::Encrypted));
}

#[test]
fn serial_and_lineage_written_for_a_state_without_them_are_refused() {
    // OpenTofu writes `"serial": null` and `"lineage": ""` when the plaintext lacks them.
    let missing = envelope(Value::Null, json!("l"));
    assert_eq!(
        inspect_state(&bytes(&missing)),
        Err(StateError::MissingSerial {
            kind: DocumentKind::Encrypted
        })
    );
    let empty = envelope(json!(1), json!(""));
    assert_eq!(
        inspect_state(&bytes(&empty)),
        Err(StateError::EmptyLineage {
            kind: DocumentKind::Encrypted
        })
    );
    let mut no_lineage = envelope(json!(1), json!("l"));
    no_lineage.as_object_mut().unwrap().remove("lineage");
    assert_eq!(
        inspect_state(&bytes(&no_lineage)),
        Err(StateError::MissingLineage {
            kind: DocumentKind::Encrypted
        })
    );
    let negative = envelope(json!(-1), json!("l"));
    assert!(matches!(
        inspect_state(&bytes(&negative)),
        Err(StateError::InvalidField {
            kind: DocumentKind::Encrypted,
            field: "serial",
            ..
        })
    ));
}

#[test]
fn envelope_fields_are_validated() {
    let mut other_version = envelope(json!(1), json!("l"));
    other_version["encryption_version"] = json!("v1");
    assert_eq!(
        inspect_state(&bytes(&other_version)),
        Err(StateError::UnsupportedEncryptionVersion {
            version: "v1".into()
        })
    );

    let mut no_version = envelope(json!(1), json!("l"));
    no_version
        .as_object_mut()
        .unwrap()
        .remove("encryption_version");
    assert_eq!(
        inspect_state(&bytes(&no_version)),
        Err(StateError::MissingField {
            kind: DocumentKind::Encrypted,
            field: "encryption_version"
        })
    );

    let mut no_data = envelope(json!(1), json!("l"));
    no_data.as_object_mut().unwrap().remove("encrypted_data");
    assert_eq!(
        inspect_state(&bytes(&no_data)),
        Err(StateError::MissingField {
            kind: DocumentKind::Encrypted,
            field: "encrypted_data"
        })
    );

    for bad in [
        json!(""),
        json!("abc"),
        json!("ab$d"),
        json!("a==="),
        json!(12),
    ] {
        let mut sample = envelope(json!(1), json!("l"));
        sample["encrypted_data"] = bad.clone();
        assert!(
            matches!(
                inspect_state(&bytes(&sample)),
                Err(StateError::InvalidField {
                    kind: DocumentKind::Encrypted,
                    field: "encrypted_data",
                    ..
                })
            ),
            "{bad}"
        );
    }

    let mut meta_list = envelope(json!(1), json!("l"));
    meta_list["meta"] = json!(["x"]);
    assert!(matches!(
        inspect_state(&bytes(&meta_list)),
        Err(StateError::InvalidField {
            kind: DocumentKind::Encrypted,
            field: "meta",
            ..
        })
    ));
}

#[test]
fn a_state_that_mentions_encryption_only_in_its_resources_is_plain() {
    let state = json!({
        "version": 4, "terraform_version": "1.12.6", "serial": 3, "lineage": "l",
        "outputs": {},
        "resources": [{"mode": "managed", "type": "x", "name": "y", "provider": "p",
            "instances": [{"schema_version": 0, "attributes": {"encrypted_data": "zz", "encryption_version": "v0"}}]}],
        "check_results": null
    });
    let document = inspect_state(&bytes(&state)).unwrap();
    assert!(!document.is_encrypted());
    assert_eq!(document.header().version, Some(4));
}
