//! Envelope encryption: round trip and every kind of tampering detected as damage.
#![allow(clippy::unwrap_used)]

use cairn_storage::{
    EnvelopeError, SecretKey, aad_for, new_nonce, open, open_in_place, seal, seal_in_place,
    sha256_hex, verify_sha256,
};

#[test]
fn seal_open_round_trip() {
    let key = SecretKey::random().unwrap();
    let aad = aad_for("state-1", 7);
    let plaintext = br#"{"version":4,"serial":3,"lineage":"abc"}"#;
    let sealed = seal(key.expose(), &aad, plaintext).unwrap();
    assert_eq!(sealed.ciphertext.len(), plaintext.len() + 16);
    assert_ne!(&sealed.ciphertext[..plaintext.len()], plaintext.as_slice());
    assert_eq!(
        open(key.expose(), &sealed.nonce, &aad, &sealed.ciphertext).unwrap(),
        plaintext
    );
    // Fresh nonce each time.
    let again = seal(key.expose(), &aad, plaintext).unwrap();
    assert_ne!(again.nonce, sealed.nonce);
    // Empty payloads work too.
    let empty = seal(key.expose(), &aad, b"").unwrap();
    assert!(
        open(key.expose(), &empty.nonce, &aad, &empty.ciphertext)
            .unwrap()
            .is_empty()
    );
}

#[test]
fn in_place_sealing_is_the_same_envelope_as_sealing_a_copy() {
    let key = SecretKey::random().unwrap();
    let aad = aad_for("state-1", 8);
    let plaintext: Vec<u8> = (0..300_000u32).map(|i| (i % 251) as u8).collect();
    let nonce = new_nonce().unwrap();
    let sealed = seal_in_place(key.expose(), nonce, &aad, plaintext.clone()).unwrap();
    assert_eq!(sealed.len(), plaintext.len() + 16);
    // Either opener reads what the other sealed.
    assert_eq!(
        open(key.expose(), &nonce, &aad, &sealed).unwrap(),
        plaintext
    );
    let copy = seal(key.expose(), &aad, &plaintext).unwrap();
    assert_eq!(
        open_in_place(key.expose(), &copy.nonce, &aad, copy.ciphertext).unwrap(),
        plaintext
    );
    // Another generation's associated data, a flipped byte, a short buffer: damage.
    let other = aad_for("state-1", 9);
    let err = open_in_place(key.expose(), &nonce, &other, sealed.clone()).unwrap_err();
    assert!(matches!(err, EnvelopeError::Authentication), "{err:?}");
    let mut flipped = sealed;
    flipped[1234] ^= 0x40;
    let err = open_in_place(key.expose(), &nonce, &aad, flipped).unwrap_err();
    assert!(matches!(err, EnvelopeError::Authentication), "{err:?}");
    let err = open_in_place(key.expose(), &nonce, &aad, vec![0; 15]).unwrap_err();
    assert!(matches!(err, EnvelopeError::Authentication), "{err:?}");
    assert_ne!(new_nonce().unwrap(), nonce);
}

#[test]
fn a_sha256_of_pieces_is_the_sha256_of_the_whole() {
    let bytes: Vec<u8> = (0..100_000u32).map(|i| (i % 253) as u8).collect();
    let mut stream = cairn_storage::Sha256Stream::new();
    for piece in bytes.chunks(7_777) {
        stream.update(piece);
    }
    assert_eq!(stream.finish_hex(), sha256_hex(&bytes));
    assert_eq!(
        cairn_storage::Sha256Stream::new().finish_hex(),
        sha256_hex(b"")
    );
}

#[test]
fn tampering_is_damage() {
    let key = SecretKey::random().unwrap();
    let aad = aad_for("state-1", 7);
    let sealed = seal(key.expose(), &aad, b"payload bytes").unwrap();

    for index in [0, 5, sealed.ciphertext.len() - 1] {
        let mut flipped = sealed.ciphertext.clone();
        flipped[index] ^= 0x01;
        let err = open(key.expose(), &sealed.nonce, &aad, &flipped).unwrap_err();
        assert!(matches!(err, EnvelopeError::Authentication), "{err:?}");
        assert!(err.is_damage());
    }
    for wrong_aad in [aad_for("state-1", 8), aad_for("state-2", 7), Vec::new()] {
        let err = open(key.expose(), &sealed.nonce, &wrong_aad, &sealed.ciphertext).unwrap_err();
        assert!(err.is_damage(), "{err:?}");
    }
    let other_key = SecretKey::random().unwrap();
    let err = open(other_key.expose(), &sealed.nonce, &aad, &sealed.ciphertext).unwrap_err();
    assert!(err.is_damage());
    let mut nonce = sealed.nonce;
    nonce[0] ^= 1;
    assert!(
        open(key.expose(), &nonce, &aad, &sealed.ciphertext)
            .unwrap_err()
            .is_damage()
    );
    let err = open(key.expose(), &sealed.nonce[..11], &aad, &sealed.ciphertext).unwrap_err();
    assert!(
        matches!(err, EnvelopeError::InvalidNonce { len: 11 }),
        "{err:?}"
    );
    assert!(err.is_damage());
    let err = open(key.expose(), &sealed.nonce, &aad, &sealed.ciphertext[..10]).unwrap_err();
    assert!(err.is_damage());
    // The error text carries no payload.
    assert!(!err.to_string().contains("payload"));
}

#[test]
fn aad_is_unambiguous() {
    assert_ne!(aad_for("ab", 1), aad_for("a", 1));
    assert_ne!(aad_for("state", 1), aad_for("state", 256));
    // A state id ending in bytes that look like a generation does not collide.
    let mut tricky = String::from("s");
    tricky.push('\u{0}');
    assert_ne!(aad_for(&tricky, 0), aad_for("s", 0));
    assert_eq!(aad_for("state", 42), aad_for("state", 42));
}

#[test]
fn sha256_helpers() {
    assert_eq!(
        sha256_hex(b"abc"),
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
    );
    verify_sha256(
        b"abc",
        "BA7816BF8F01CFEA414140DE5DAE2223B00361A396177A9CB410FF61F20015AD",
    )
    .unwrap();
    let err = verify_sha256(b"abd", &sha256_hex(b"abc")).unwrap_err();
    assert!(matches!(err, EnvelopeError::HashMismatch { .. }), "{err:?}");
    assert!(err.is_damage());
}
