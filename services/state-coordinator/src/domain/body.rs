//! A state body as it arrives: the chunks go into one buffer (sized from the announced
//! length, with room for the AES-GCM tag it is sealed with in place) while its MD5 (for the
//! Content-MD5 check) and SHA-256 (its identity) are computed chunk by chunk, so no pass
//! over the whole body is left for after it has arrived except its parse.
use bytes::Bytes;
use cairn_storage::Sha256Stream;
use md5::{Digest, Md5};

/// A body being received.
pub struct BodyBuffer {
    bytes: Vec<u8>,
    md5: Md5,
    sha256: Sha256Stream,
}

/// A body received whole, with its digests.
#[derive(Debug, Clone)]
pub struct ReceivedBody {
    pub bytes: Bytes,
    pub md5: [u8; 16],
    pub sha256_hex: String,
}

impl BodyBuffer {
    /// A buffer for a body of `announced` bytes (0 when unknown; it grows as needed).
    pub fn new(announced: usize) -> Self {
        Self {
            bytes: Vec::with_capacity(announced + cairn_storage::envelope::TAG_BYTES),
            md5: Md5::new(),
            sha256: Sha256Stream::new(),
        }
    }

    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    pub fn push(&mut self, chunk: &[u8]) {
        self.md5.update(chunk);
        self.sha256.update(chunk);
        self.bytes.extend_from_slice(chunk);
    }

    pub fn finish(self) -> ReceivedBody {
        ReceivedBody {
            bytes: Bytes::from(self.bytes),
            md5: self.md5.finalize().into(),
            sha256_hex: self.sha256.finish_hex(),
        }
    }
}

impl ReceivedBody {
    /// A body that arrived in one piece.
    pub fn of(bytes: &[u8]) -> Self {
        let mut buffer = BodyBuffer::new(bytes.len());
        buffer.push(bytes);
        buffer.finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digests_of_the_pieces_are_those_of_the_whole() {
        let whole: Vec<u8> = (0..50_000u32).map(|i| (i % 241) as u8).collect();
        let mut buffer = BodyBuffer::new(0);
        for piece in whole.chunks(4_099) {
            buffer.push(piece);
        }
        let received = buffer.finish();
        assert_eq!(received.bytes.as_ref(), whole.as_slice());
        assert_eq!(received.sha256_hex, cairn_storage::sha256_hex(&whole));
        let md5: [u8; 16] = Md5::digest(&whole).into();
        assert_eq!(received.md5, md5);
        let once = ReceivedBody::of(&whole);
        assert_eq!((once.md5, once.sha256_hex), (md5, received.sha256_hex));
    }
}
