//! The Content-MD5 header tofu sends with every body it writes (states, LockInfo): when
//! present, it must be the base64 MD5 of the body received.
use base64::Engine as _;
use base64::engine::general_purpose::STANDARD;

use crate::error::Error;

/// Checks `sent` (the header's bytes, if the request had one) against `body` (whose MD5 is
/// computed only then).
pub fn check(sent: Option<&[u8]>, body: &[u8]) -> Result<(), Error> {
    let Some(sent) = sent else {
        return Ok(());
    };
    if sent == STANDARD.encode(cairn_storage::md5(body)).as_bytes() {
        Ok(())
    } else {
        Err(Error::invalid_argument(
            "Content-MD5 does not match the body".to_owned(),
        ))
    }
}
