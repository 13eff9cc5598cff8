//! A 256-bit secret key held in memory: zeroed when dropped, never printed, compared in
//! constant time.

use std::sync::atomic::{Ordering, compiler_fence};

/// 32 bytes of key material. `Debug` prints `<redacted>`; the bytes are overwritten with
/// zeros on drop.
#[derive(Clone)]
pub struct SecretKey([u8; 32]);

impl SecretKey {
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(bytes)
    }

    /// Copies a 32-byte slice; `None` for any other length.
    pub fn from_slice(bytes: &[u8]) -> Option<Self> {
        let array: [u8; 32] = bytes.try_into().ok()?;
        Some(Self(array))
    }

    /// A fresh random key.
    pub fn random() -> Result<Self, aws_lc_rs::error::Unspecified> {
        let mut key = Self([0u8; 32]);
        aws_lc_rs::rand::fill(&mut key.0)?;
        Ok(key)
    }

    /// The key bytes, for handing to the cipher.
    pub fn expose(&self) -> &[u8; 32] {
        &self.0
    }
}

impl Drop for SecretKey {
    fn drop(&mut self) {
        self.0.fill(0);
        // Keep the zeroing from being optimised away as a dead store.
        std::hint::black_box(&mut self.0);
        compiler_fence(Ordering::SeqCst);
    }
}

impl PartialEq for SecretKey {
    fn eq(&self, other: &Self) -> bool {
        aws_lc_rs::constant_time::verify_slices_are_equal(&self.0, &other.0).is_ok()
    }
}

impl Eq for SecretKey {}

impl std::fmt::Debug for SecretKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("SecretKey(<redacted>)")
    }
}
