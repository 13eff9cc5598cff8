//! The chunked envelope: a payload sealed as a sequence of AES-256-GCM chunks, so a reader
//! can hand out each chunk's plaintext as soon as that chunk is authenticated instead of
//! after the whole object (a state read can then stream from the object store to the
//! client). The construction follows the STREAM scheme (Hoang, Reyhanitabar, Rogaway,
//! Vizár, "Online Authenticated-Encryption and its Nonce-Reuse Misuse-Resistance", 2015):
//!
//! - The plaintext is cut into chunks of [`CHUNK_PLAINTEXT_BYTES`]; the last one holds the
//!   rest (0 to [`CHUNK_PLAINTEXT_BYTES`] bytes, so an empty payload is one empty chunk).
//! - Chunk `i` is sealed with the payload's associated data and the nonce
//!   `base XOR (0^7 ‖ u32be(i) ‖ last)`, where `base` is a random 12-byte nonce and `last`
//!   is 1 for the final chunk only. The ciphertext is the chunks, each followed by its tag.
//! - So a chunk moved to another position, a chunk of another payload, a dropped or
//!   appended chunk and a payload truncated at a chunk boundary all fail authentication:
//!   position and finality are in the nonce.
//!
//! Only payloads sealed under a data key of their own use it (state generations: one fresh
//! key per written generation), so the per-chunk nonces never meet another payload's.
//!
//! A stored nonce says which envelope a payload has ([`StoredNonce`]): the 12 bytes of one
//! GCM seal ([`crate::envelope`], every payload written before this format) or
//! [`CHUNKED_NONCE_TAG`] followed by the 12-byte base. [`open_stored`] opens either.
use aws_lc_rs::aead::{Aad, LessSafeKey, Nonce};
use bytes::{Bytes, BytesMut};

use crate::envelope::{EnvelopeError, NONCE_BYTES, TAG_BYTES, aead_key, new_nonce, open_in_place};

/// Plaintext bytes per chunk (the last chunk may hold fewer).
pub const CHUNK_PLAINTEXT_BYTES: usize = 64 * 1024;
/// Bytes one full chunk takes in the ciphertext.
pub const CHUNK_SEALED_BYTES: usize = CHUNK_PLAINTEXT_BYTES + TAG_BYTES;
/// The first byte of a stored nonce of the chunked envelope.
pub const CHUNKED_NONCE_TAG: u8 = 2;

/// Which envelope a stored nonce belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StoredNonce {
    /// One AES-GCM seal of the whole payload under this nonce.
    Single([u8; NONCE_BYTES]),
    /// The chunked envelope with this base nonce.
    Chunked([u8; NONCE_BYTES]),
}

impl StoredNonce {
    /// Reads a stored nonce; anything but the two layouts is proof of damage.
    pub fn parse(stored: &[u8]) -> Result<Self, EnvelopeError> {
        let invalid = || EnvelopeError::InvalidNonce { len: stored.len() };
        match stored.len() {
            NONCE_BYTES => Ok(Self::Single(stored.try_into().map_err(|_| invalid())?)),
            len if len == NONCE_BYTES + 1 && stored[0] == CHUNKED_NONCE_TAG => Ok(Self::Chunked(
                stored[1..].try_into().map_err(|_| invalid())?,
            )),
            _ => Err(invalid()),
        }
    }

    /// The bytes to store.
    pub fn to_bytes(self) -> Vec<u8> {
        match self {
            Self::Single(nonce) => nonce.to_vec(),
            Self::Chunked(base) => {
                let mut stored = Vec::with_capacity(NONCE_BYTES + 1);
                stored.push(CHUNKED_NONCE_TAG);
                stored.extend_from_slice(&base);
                stored
            }
        }
    }
}

/// A payload sealed in chunks.
#[derive(Clone, PartialEq, Eq)]
pub struct SealedChunks {
    /// The nonce to store ([`StoredNonce::Chunked`]'s bytes).
    pub nonce: Vec<u8>,
    pub ciphertext: Vec<u8>,
}

impl std::fmt::Debug for SealedChunks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SealedChunks")
            .field("nonce", &hex::encode(&self.nonce))
            .field("ciphertext_len", &self.ciphertext.len())
            .finish()
    }
}

/// The nonce of chunk `index` (`last` for the final one).
fn chunk_nonce(base: &[u8; NONCE_BYTES], index: u32, last: bool) -> Nonce {
    let mut nonce = *base;
    for (byte, counter) in nonce[7..11].iter_mut().zip(index.to_be_bytes()) {
        *byte ^= counter;
    }
    nonce[11] ^= u8::from(last);
    Nonce::assume_unique_for_key(nonce)
}

/// How many chunks a payload of `plaintext_len` bytes has (at least one).
fn chunk_count(plaintext_len: usize) -> usize {
    plaintext_len.div_ceil(CHUNK_PLAINTEXT_BYTES).max(1)
}

/// The ciphertext length of a payload of `plaintext_len` bytes.
pub fn sealed_len(plaintext_len: usize) -> usize {
    plaintext_len + chunk_count(plaintext_len) * TAG_BYTES
}

/// The plaintext length of a chunked ciphertext of `sealed_len` bytes; a length no payload
/// seals to is proof of damage (a truncated or extended object).
pub fn plaintext_len(sealed_len: usize) -> Result<usize, EnvelopeError> {
    if sealed_len < TAG_BYTES {
        return Err(EnvelopeError::Authentication);
    }
    let full = sealed_len / CHUNK_SEALED_BYTES;
    let rest = sealed_len % CHUNK_SEALED_BYTES;
    match (full, rest) {
        // Exactly full chunks: the last of them is the final chunk.
        (_, 0) => Ok(full * CHUNK_PLAINTEXT_BYTES),
        (_, rest) if rest >= TAG_BYTES => Ok(full * CHUNK_PLAINTEXT_BYTES + rest - TAG_BYTES),
        _ => Err(EnvelopeError::Authentication),
    }
}

fn chunk_index(index: usize) -> Result<u32, EnvelopeError> {
    u32::try_from(index).map_err(|_| EnvelopeError::Crypto("payload has too many chunks"))
}

/// Seals `plaintext` in chunks under `key` (a key of this payload only) with a fresh base
/// nonce, authenticating `aad` in every chunk.
pub fn seal_chunked(
    key: &[u8; 32],
    aad: &[u8],
    plaintext: &[u8],
) -> Result<SealedChunks, EnvelopeError> {
    let base = new_nonce()?;
    let aead = aead_key(key)?;
    let mut ciphertext = Vec::with_capacity(sealed_len(plaintext.len()));
    let count = chunk_count(plaintext.len());
    let mut chunks = plaintext.chunks(CHUNK_PLAINTEXT_BYTES);
    for index in 0..count {
        let chunk = chunks.next().unwrap_or_default();
        let start = ciphertext.len();
        ciphertext.extend_from_slice(chunk);
        let tag = aead
            .seal_in_place_separate_tag(
                chunk_nonce(&base, chunk_index(index)?, index + 1 == count),
                Aad::from(aad),
                &mut ciphertext[start..],
            )
            .map_err(|_| EnvelopeError::Crypto("AES-256-GCM seal"))?;
        ciphertext.extend_from_slice(tag.as_ref());
    }
    Ok(SealedChunks {
        nonce: StoredNonce::Chunked(base).to_bytes(),
        ciphertext,
    })
}

/// Opens a payload of either envelope, by its stored nonce, in place: the buffer comes back
/// holding the plaintext only. Any mismatch of key, nonce, associated data or bytes is
/// damage ([`EnvelopeError::is_damage`]).
pub fn open_stored(
    key: &[u8; 32],
    stored_nonce: &[u8],
    aad: &[u8],
    mut buffer: Vec<u8>,
) -> Result<Vec<u8>, EnvelopeError> {
    let base = match StoredNonce::parse(stored_nonce)? {
        StoredNonce::Single(nonce) => return open_in_place(key, &nonce, aad, buffer),
        StoredNonce::Chunked(base) => base,
    };
    let total = plaintext_len(buffer.len())?;
    let count = chunk_count(total);
    let aead = aead_key(key)?;
    // Chunk by chunk, each chunk's plaintext moved down over the tags before it.
    let (mut read, mut written) = (0, 0);
    for index in 0..count {
        let end = (read + CHUNK_SEALED_BYTES).min(buffer.len());
        let opened = aead
            .open_within(
                chunk_nonce(&base, chunk_index(index)?, index + 1 == count),
                Aad::from(aad),
                &mut buffer[written..end],
                (read - written)..,
            )
            .map_err(|_| EnvelopeError::Authentication)?
            .len();
        written += opened;
        read = end;
    }
    buffer.truncate(written);
    Ok(buffer)
}

/// Opens a chunked payload as its bytes arrive: [`Self::push`] hands back the plaintext of
/// every chunk authenticated so far, [`Self::finish`] the final chunk's once the bytes have
/// ended. No byte is handed out before its chunk's tag is checked, and only `finish`
/// proves the payload was not cut short: a reader must not treat what `push` gave as the
/// whole payload before `finish` succeeded.
pub struct ChunkOpener {
    key: LessSafeKey,
    base: [u8; NONCE_BYTES],
    aad: Vec<u8>,
    next_index: usize,
    pending: BytesMut,
}

impl std::fmt::Debug for ChunkOpener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ChunkOpener")
            .field("next_index", &self.next_index)
            .field("pending", &self.pending.len())
            .finish_non_exhaustive()
    }
}

impl ChunkOpener {
    /// An opener of the chunked payload with this stored nonce, or `None` when the nonce is
    /// of the single-seal envelope (which can only be opened whole).
    pub fn for_stored(
        key: &[u8; 32],
        stored_nonce: &[u8],
        aad: &[u8],
    ) -> Result<Option<Self>, EnvelopeError> {
        let StoredNonce::Chunked(base) = StoredNonce::parse(stored_nonce)? else {
            return Ok(None);
        };
        Ok(Some(Self {
            key: aead_key(key)?,
            base,
            aad: aad.to_vec(),
            next_index: 0,
            pending: BytesMut::with_capacity(CHUNK_SEALED_BYTES + 1),
        }))
    }

    fn open_chunk(&mut self, mut sealed: BytesMut, last: bool) -> Result<Bytes, EnvelopeError> {
        let len = self
            .key
            .open_in_place(
                chunk_nonce(&self.base, chunk_index(self.next_index)?, last),
                Aad::from(&self.aad),
                &mut sealed,
            )
            .map_err(|_| EnvelopeError::Authentication)?
            .len();
        self.next_index += 1;
        sealed.truncate(len);
        Ok(sealed.freeze())
    }

    /// Takes the next bytes of the ciphertext; returns the plaintext of the chunks they
    /// complete, except a chunk that may be the final one (kept until more bytes show it is
    /// not, or [`Self::finish`]).
    pub fn push(&mut self, bytes: &[u8]) -> Result<Vec<Bytes>, EnvelopeError> {
        self.pending.extend_from_slice(bytes);
        let mut opened = Vec::new();
        // A full chunk followed by at least one more byte is not the final chunk.
        while self.pending.len() > CHUNK_SEALED_BYTES {
            let sealed = self.pending.split_to(CHUNK_SEALED_BYTES);
            opened.push(self.open_chunk(sealed, false)?);
        }
        Ok(opened)
    }

    /// The bytes have ended: opens the final chunk (its tag proves the payload is whole).
    pub fn finish(mut self) -> Result<Bytes, EnvelopeError> {
        if self.pending.len() < TAG_BYTES {
            return Err(EnvelopeError::Authentication);
        }
        let sealed = std::mem::take(&mut self.pending);
        self.open_chunk(sealed, true)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn lengths_match_what_sealing_produces() {
        let key = [7u8; 32];
        for len in [
            0,
            1,
            CHUNK_PLAINTEXT_BYTES - 1,
            CHUNK_PLAINTEXT_BYTES,
            CHUNK_PLAINTEXT_BYTES + 1,
            3 * CHUNK_PLAINTEXT_BYTES,
        ] {
            let sealed = seal_chunked(&key, b"a", &vec![1u8; len]).unwrap();
            assert_eq!(sealed.ciphertext.len(), sealed_len(len), "{len}");
            assert_eq!(
                plaintext_len(sealed.ciphertext.len()).unwrap(),
                len,
                "{len}"
            );
        }
        // No payload seals to these lengths.
        assert!(plaintext_len(TAG_BYTES - 1).is_err());
        assert!(plaintext_len(CHUNK_SEALED_BYTES + TAG_BYTES - 1).is_err());
    }

    #[test]
    fn chunk_nonces_differ_by_position_and_finality() {
        let base = [0xA5u8; NONCE_BYTES];
        let mut seen = std::collections::HashSet::new();
        for index in [0u32, 1, 2, 255, 256, u32::MAX] {
            for last in [false, true] {
                let nonce = chunk_nonce(&base, index, last);
                assert!(seen.insert(*nonce.as_ref()), "{index} {last}");
            }
        }
    }

    #[test]
    fn stored_nonces_name_their_envelope() {
        let n = [3u8; NONCE_BYTES];
        assert_eq!(StoredNonce::parse(&n).unwrap(), StoredNonce::Single(n));
        let chunked = StoredNonce::Chunked(n).to_bytes();
        assert_eq!(chunked.len(), NONCE_BYTES + 1);
        assert_eq!(
            StoredNonce::parse(&chunked).unwrap(),
            StoredNonce::Chunked(n)
        );
        let mut other_tag = chunked.clone();
        other_tag[0] = 9;
        for bad in [&other_tag[..], &n[..11], &[][..], &[2u8; 14][..]] {
            let err = StoredNonce::parse(bad).unwrap_err();
            assert!(err.is_damage(), "{bad:?}");
        }
    }
}
