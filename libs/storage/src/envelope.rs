//! Envelope encryption of state payloads: AES-256-GCM under a per-generation data key, the
//! associated data that binds a ciphertext to its state and generation, and sha256 digests.

use aws_lc_rs::aead::{AES_256_GCM, Aad, LessSafeKey, NONCE_LEN, Nonce, UnboundKey};
use aws_lc_rs::digest::{SHA256, digest};

/// Length of an AES-GCM nonce in bytes.
pub const NONCE_BYTES: usize = NONCE_LEN;
/// Length of the AES-GCM authentication tag appended to every ciphertext.
pub const TAG_BYTES: usize = 16;

/// Errors of sealing, opening and digest checks.
#[derive(Debug, thiserror::Error)]
pub enum EnvelopeError {
    /// The ciphertext, nonce, key or associated data do not belong together: AES-GCM
    /// authentication failed. Proof of damage.
    #[error(
        "AES-GCM authentication failed: the ciphertext does not match its key, nonce or associated data"
    )]
    Authentication,
    /// A stored nonce does not have the AES-GCM nonce length. Proof of damage.
    #[error("stored nonce is {len} bytes long, expected {NONCE_BYTES}")]
    InvalidNonce { len: usize },
    /// The bytes do not have the recorded sha256. Proof of damage.
    #[error("sha256 mismatch: expected {expected}, found {actual}")]
    HashMismatch { expected: String, actual: String },
    /// The crypto library failed for a reason unrelated to the data (e.g. no randomness).
    #[error("cryptographic operation failed: {0}")]
    Crypto(&'static str),
}

impl EnvelopeError {
    /// True when the error proves that the stored data is broken.
    pub fn is_damage(&self) -> bool {
        match self {
            EnvelopeError::Authentication
            | EnvelopeError::InvalidNonce { .. }
            | EnvelopeError::HashMismatch { .. } => true,
            EnvelopeError::Crypto(_) => false,
        }
    }
}

/// A sealed payload: the random nonce and the ciphertext with its tag appended.
#[derive(Clone, PartialEq, Eq)]
pub struct Sealed {
    pub nonce: [u8; NONCE_BYTES],
    pub ciphertext: Vec<u8>,
}

impl std::fmt::Debug for Sealed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Sealed")
            .field("nonce", &hex::encode(self.nonce))
            .field("ciphertext_len", &self.ciphertext.len())
            .finish()
    }
}

fn aead_key(key: &[u8; 32]) -> Result<LessSafeKey, EnvelopeError> {
    let unbound = UnboundKey::new(&AES_256_GCM, key)
        .map_err(|_| EnvelopeError::Crypto("AES-256-GCM key setup"))?;
    Ok(LessSafeKey::new(unbound))
}

/// Encrypts `plaintext` under `key` with a fresh random nonce, authenticating `aad`.
pub fn seal(key: &[u8; 32], aad: &[u8], plaintext: &[u8]) -> Result<Sealed, EnvelopeError> {
    let nonce = new_nonce()?;
    let mut buffer = Vec::with_capacity(plaintext.len() + TAG_BYTES);
    buffer.extend_from_slice(plaintext);
    let ciphertext = seal_in_place(key, nonce, aad, buffer)?;
    Ok(Sealed { nonce, ciphertext })
}

/// A fresh random AES-GCM nonce (one per sealed payload).
pub fn new_nonce() -> Result<[u8; NONCE_BYTES], EnvelopeError> {
    let mut nonce = [0u8; NONCE_BYTES];
    aws_lc_rs::rand::fill(&mut nonce)
        .map_err(|_| EnvelopeError::Crypto("random nonce generation"))?;
    Ok(nonce)
}

/// [`seal`] without a copy: encrypts the caller's buffer in place under `nonce` (use
/// [`new_nonce`], never twice with one key) and appends the tag. A large buffer grows by the
/// tag's 16 bytes; the allocator extends it in place where it can.
pub fn seal_in_place(
    key: &[u8; 32],
    nonce: [u8; NONCE_BYTES],
    aad: &[u8],
    mut buffer: Vec<u8>,
) -> Result<Vec<u8>, EnvelopeError> {
    let key = aead_key(key)?;
    buffer.reserve_exact(TAG_BYTES);
    key.seal_in_place_append_tag(
        Nonce::assume_unique_for_key(nonce),
        Aad::from(aad),
        &mut buffer,
    )
    .map_err(|_| EnvelopeError::Crypto("AES-256-GCM seal"))?;
    Ok(buffer)
}

/// [`open`] without a copy: decrypts the caller's buffer in place and returns it holding the
/// plaintext only.
pub fn open_in_place(
    key: &[u8; 32],
    nonce: &[u8],
    aad: &[u8],
    mut buffer: Vec<u8>,
) -> Result<Vec<u8>, EnvelopeError> {
    let nonce: [u8; NONCE_BYTES] = nonce
        .try_into()
        .map_err(|_| EnvelopeError::InvalidNonce { len: nonce.len() })?;
    if buffer.len() < TAG_BYTES {
        return Err(EnvelopeError::Authentication);
    }
    let key = aead_key(key)?;
    let plain_len = key
        .open_in_place(
            Nonce::assume_unique_for_key(nonce),
            Aad::from(aad),
            &mut buffer,
        )
        .map_err(|_| EnvelopeError::Authentication)?
        .len();
    buffer.truncate(plain_len);
    Ok(buffer)
}

/// Decrypts and authenticates `ciphertext` (tag appended). Any mismatch of key, nonce,
/// associated data or bytes is [`EnvelopeError::Authentication`].
pub fn open(
    key: &[u8; 32],
    nonce: &[u8],
    aad: &[u8],
    ciphertext: &[u8],
) -> Result<Vec<u8>, EnvelopeError> {
    open_in_place(key, nonce, aad, ciphertext.to_vec())
}

/// Associated data binding a ciphertext to one generation of one state.
///
/// Layout: `b"cairn-state-v1\0"`, the state id's length as u32 big-endian, the state id's
/// bytes, the generation as u64 big-endian. The length prefix keeps it unambiguous.
pub fn aad_for(state_id: &str, generation: u64) -> Vec<u8> {
    const TAG: &[u8] = b"cairn-state-v1\0";
    let id = state_id.as_bytes();
    let id_len = u32::try_from(id.len()).expect("a state id is far shorter than 4 GiB");
    let mut aad = Vec::with_capacity(TAG.len() + 4 + id.len() + 8);
    aad.extend_from_slice(TAG);
    aad.extend_from_slice(&id_len.to_be_bytes());
    aad.extend_from_slice(id);
    aad.extend_from_slice(&generation.to_be_bytes());
    aad
}

/// Lowercase hex sha256 of `bytes`.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(digest(&SHA256, bytes).as_ref())
}

/// A sha256 computed piece by piece (a body hashed as it arrives).
pub struct Sha256Stream(aws_lc_rs::digest::Context);

impl Sha256Stream {
    pub fn new() -> Self {
        Self(aws_lc_rs::digest::Context::new(&SHA256))
    }

    pub fn update(&mut self, bytes: &[u8]) {
        self.0.update(bytes);
    }

    /// Lowercase hex, as [`sha256_hex`] of all the pieces in order.
    pub fn finish_hex(self) -> String {
        hex::encode(self.0.finish().as_ref())
    }
}

impl Default for Sha256Stream {
    fn default() -> Self {
        Self::new()
    }
}

/// Raw sha256 of `bytes`.
pub fn sha256(bytes: &[u8]) -> [u8; 32] {
    let mut out = [0u8; 32];
    out.copy_from_slice(digest(&SHA256, bytes).as_ref());
    out
}

/// Checks that `bytes` have the sha256 `expected_hex` (case-insensitive);
/// a difference is [`EnvelopeError::HashMismatch`].
pub fn verify_sha256(bytes: &[u8], expected_hex: &str) -> Result<(), EnvelopeError> {
    let actual = sha256_hex(bytes);
    if actual.eq_ignore_ascii_case(expected_hex) {
        Ok(())
    } else {
        Err(EnvelopeError::HashMismatch {
            expected: expected_hex.to_owned(),
            actual,
        })
    }
}
