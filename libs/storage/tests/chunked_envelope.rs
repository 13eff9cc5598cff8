//! The chunked envelope: every way of cutting, reordering, splicing or flipping a chunked
//! payload is damage, whole or streamed; the streaming opener hands out exactly the
//! plaintext, never a byte of an unauthenticated chunk; payloads of the single-seal
//! envelope still open through the same entry point.
#![allow(clippy::unwrap_used)]

use cairn_storage::chunked::{CHUNK_PLAINTEXT_BYTES, CHUNK_SEALED_BYTES};
use cairn_storage::{
    ChunkOpener, EnvelopeError, SecretKey, aad_for, open_stored, seal, seal_chunked,
};

const C: usize = CHUNK_PLAINTEXT_BYTES;
const S: usize = CHUNK_SEALED_BYTES;

fn payload(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

/// Streams `ciphertext` through an opener in pieces of `piece` bytes.
fn stream_open(
    key: &SecretKey,
    nonce: &[u8],
    aad: &[u8],
    ciphertext: &[u8],
    piece: usize,
) -> Result<Vec<u8>, EnvelopeError> {
    let mut opener = ChunkOpener::for_stored(key.expose(), nonce, aad)?.unwrap();
    let mut out = Vec::new();
    for bytes in ciphertext.chunks(piece.max(1)) {
        for plain in opener.push(bytes)? {
            out.extend_from_slice(&plain);
        }
    }
    out.extend_from_slice(&opener.finish()?);
    Ok(out)
}

fn assert_damage(result: Result<Vec<u8>, EnvelopeError>, what: &str) {
    match result {
        Err(e) => assert!(e.is_damage(), "{what}: {e:?} is not damage"),
        Ok(bytes) => panic!("{what}: opened {} bytes", bytes.len()),
    }
}

#[test]
fn every_size_round_trips_whole_and_streamed_in_any_pieces() {
    let key = SecretKey::random().unwrap();
    let aad = aad_for("state-1", 3);
    for len in [0, 1, 1000, C - 1, C, C + 1, 2 * C, 3 * C + 17] {
        let plaintext = payload(len);
        let sealed = seal_chunked(key.expose(), &aad, &plaintext).unwrap();
        assert_eq!(
            open_stored(key.expose(), &sealed.nonce, &aad, sealed.ciphertext.clone()).unwrap(),
            plaintext,
            "whole, {len} bytes"
        );
        for piece in [1, 15, 16, 4096, S - 1, S, S + 1, 1 << 20] {
            if piece == 1 && len > 2 * C {
                continue; // byte by byte over a few chunks is enough
            }
            assert_eq!(
                stream_open(&key, &sealed.nonce, &aad, &sealed.ciphertext, piece).unwrap(),
                plaintext,
                "streamed, {len} bytes in pieces of {piece}"
            );
        }
    }
}

#[test]
fn two_seals_of_one_payload_differ() {
    let key = SecretKey::random().unwrap();
    let aad = aad_for("state-1", 3);
    let a = seal_chunked(key.expose(), &aad, &payload(2 * C)).unwrap();
    let b = seal_chunked(key.expose(), &aad, &payload(2 * C)).unwrap();
    assert_ne!(a.nonce, b.nonce);
    assert_ne!(a.ciphertext, b.ciphertext);
}

#[test]
fn cutting_reordering_splicing_or_flipping_chunks_is_damage() {
    let key = SecretKey::random().unwrap();
    let aad = aad_for("state-1", 4);
    let plaintext = payload(3 * C + 100);
    let sealed = seal_chunked(key.expose(), &aad, &plaintext).unwrap();
    let ct = &sealed.ciphertext;
    let open_both = |bytes: Vec<u8>, what: &str| {
        assert_damage(
            open_stored(key.expose(), &sealed.nonce, &aad, bytes.clone()),
            &format!("{what} (whole)"),
        );
        assert_damage(
            stream_open(&key, &sealed.nonce, &aad, &bytes, 10_000),
            &format!("{what} (streamed)"),
        );
    };

    // Truncated at every chunk boundary (the chunk before was not sealed as the last) and
    // inside a chunk.
    for cut in [S, 2 * S, 3 * S, 3 * S + 50, S / 2, 0] {
        open_both(ct[..cut].to_vec(), &format!("cut at {cut}"));
    }
    // The first two chunks swapped.
    let mut swapped = ct[S..2 * S].to_vec();
    swapped.extend_from_slice(&ct[..S]);
    swapped.extend_from_slice(&ct[2 * S..]);
    open_both(swapped, "swapped");
    // A middle chunk dropped.
    let mut dropped = ct[..S].to_vec();
    dropped.extend_from_slice(&ct[2 * S..]);
    open_both(dropped, "dropped");
    // A chunk appended after the last.
    let mut appended = ct.clone();
    appended.extend_from_slice(&ct[..S]);
    open_both(appended, "appended");
    // A chunk of another payload under the same key and associated data spliced in.
    let other = seal_chunked(key.expose(), &aad, &payload(3 * C + 100)).unwrap();
    let mut spliced = ct[..S].to_vec();
    spliced.extend_from_slice(&other.ciphertext[S..2 * S]);
    spliced.extend_from_slice(&ct[2 * S..]);
    open_both(spliced, "spliced");
    // One flipped bit in the middle chunk, in the last chunk's tag.
    for at in [S + 1234, ct.len() - 1] {
        let mut flipped = ct.clone();
        flipped[at] ^= 0x08;
        open_both(flipped, &format!("bit flipped at {at}"));
    }
    // Another generation's associated data, another key.
    assert_damage(
        open_stored(
            key.expose(),
            &sealed.nonce,
            &aad_for("state-1", 5),
            ct.clone(),
        ),
        "other aad",
    );
    let other_key = SecretKey::random().unwrap();
    assert_damage(
        open_stored(other_key.expose(), &sealed.nonce, &aad, ct.clone()),
        "other key",
    );
}

#[test]
fn the_stream_hands_out_nothing_of_a_chunk_before_its_tag_is_checked() {
    let key = SecretKey::random().unwrap();
    let aad = aad_for("state-1", 6);
    let plaintext = payload(3 * C);
    let sealed = seal_chunked(key.expose(), &aad, &plaintext).unwrap();
    let mut bad = sealed.ciphertext.clone();
    bad[S + 10] ^= 1; // the second chunk is damaged
    let mut opener = ChunkOpener::for_stored(key.expose(), &sealed.nonce, &aad)
        .unwrap()
        .unwrap();
    // A whole chunk and not one byte more: it may be the final chunk, so it is held.
    assert!(opener.push(&bad[..S]).unwrap().is_empty());
    // One more byte shows it is not the last: exactly its plaintext comes out.
    let first = opener.push(&bad[S..=S]).unwrap();
    assert_eq!(first.len(), 1);
    assert_eq!(&first[0][..], &plaintext[..C]);
    // The damaged second chunk is refused once it is complete, and nothing of it came out.
    assert!(opener.push(&bad[S + 1..2 * S]).unwrap().is_empty());
    let err = opener.push(&bad[2 * S..]).unwrap_err();
    assert!(matches!(err, EnvelopeError::Authentication), "{err:?}");
}

#[test]
fn single_seal_payloads_still_open_and_have_no_stream_opener() {
    let key = SecretKey::random().unwrap();
    let aad = aad_for("state-1", 7);
    let plaintext = payload(200_000);
    let sealed = seal(key.expose(), &aad, &plaintext).unwrap();
    assert_eq!(
        open_stored(key.expose(), &sealed.nonce, &aad, sealed.ciphertext.clone()).unwrap(),
        plaintext
    );
    assert!(
        ChunkOpener::for_stored(key.expose(), &sealed.nonce, &aad)
            .unwrap()
            .is_none()
    );
    // A single-seal payload read as chunked (or the reverse) does not open.
    let chunked = seal_chunked(key.expose(), &aad, &plaintext).unwrap();
    assert_damage(
        open_stored(
            key.expose(),
            &chunked.nonce,
            &aad,
            sealed.ciphertext.clone(),
        ),
        "single-seal bytes under a chunked nonce",
    );
    assert_damage(
        open_stored(
            key.expose(),
            &chunked.nonce[1..],
            &aad,
            chunked.ciphertext.clone(),
        ),
        "chunked bytes under a single-seal nonce",
    );
}
