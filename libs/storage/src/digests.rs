//! Digests of request bodies that are not part of the envelope: MD5, for the Content-MD5
//! header tofu sends with every body it writes.
//!
//! MD5 is computed by aws-lc (the C library under aws-lc-rs, already in the build), whose
//! assembly is faster than a portable Rust MD5 (`cargo bench -p cairn-storage --bench
//! digests` compares the two in one run). It is never used for integrity of what Cairn
//! stores: that is AES-GCM's tag and the recorded SHA-256 digests (envelope).

/// Length of an MD5 digest in bytes.
pub const MD5_BYTES: usize = 16;

/// The MD5 digest of `bytes`.
#[allow(unsafe_code)]
pub fn md5(bytes: &[u8]) -> [u8; MD5_BYTES] {
    let mut out = [0u8; MD5_BYTES];
    // SAFETY: `MD5(data, len, out)` reads exactly `len` bytes from `data` (a live slice of
    // that length), writes exactly MD5_DIGEST_LENGTH (16) bytes to `out` (an array of 16
    // bytes that outlives the call) and keeps neither pointer; it cannot fail.
    unsafe {
        aws_lc_sys::MD5(bytes.as_ptr(), bytes.len(), out.as_mut_ptr());
    }
    out
}

#[cfg(test)]
mod tests {
    use md5::Digest as _;

    use super::*;

    #[test]
    fn rfc_1321_test_suite() {
        let cases: [(&[u8], &str); 7] = [
            (b"", "d41d8cd98f00b204e9800998ecf8427e"),
            (b"a", "0cc175b9c0f1b6a831c399e269772661"),
            (b"abc", "900150983cd24fb0d6963f7d28e17f72"),
            (b"message digest", "f96b697d7cb7938d525a2f31aaf161d0"),
            (
                b"abcdefghijklmnopqrstuvwxyz",
                "c3fcd3d76192e4007dfb496cca67e13b",
            ),
            (
                b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789",
                "d174ab98d277d9f5a5611c2c9f419d9f",
            ),
            (
                b"12345678901234567890123456789012345678901234567890123456789012345678901234567890",
                "57edf4a22be3c955ac49da2e2107b67a",
            ),
        ];
        for (input, expected) in cases {
            assert_eq!(hex::encode(md5(input)), expected, "MD5 of {input:?}");
        }
    }

    #[test]
    fn agrees_with_the_portable_md5_at_every_block_boundary_and_a_large_body() {
        let bytes: Vec<u8> = (0..(1 << 20) + 3)
            .map(|i: u32| (i * 31 % 251) as u8)
            .collect();
        let lengths = (0..=130).chain([1000, 4096, 65_535, 65_536, 65_537, bytes.len()]);
        for len in lengths {
            let input = &bytes[..len];
            assert_eq!(
                md5(input).as_slice(),
                md5::Md5::digest(input).as_slice(),
                "length {len}"
            );
        }
    }
}
