//! A state body as it arrives: the chunks go into one buffer sized from the announced length.
//! Nothing else happens while it arrives: its checks (Content-MD5, parse, SHA-256) run once it
//! is whole, beside the sealing and storing of its copy (`app::backend`).
use bytes::Bytes;

/// A body being received.
pub struct BodyBuffer {
    bytes: Vec<u8>,
}

impl BodyBuffer {
    /// A buffer for a body of `announced` bytes (0 when unknown; it grows as needed).
    pub fn new(announced: usize) -> Self {
        Self {
            bytes: Vec::with_capacity(announced),
        }
    }

    pub fn len(&self) -> usize {
        self.bytes.len()
    }

    pub fn is_empty(&self) -> bool {
        self.bytes.is_empty()
    }

    pub fn push(&mut self, chunk: &[u8]) {
        self.bytes.extend_from_slice(chunk);
    }

    pub fn finish(self) -> Bytes {
        Bytes::from(self.bytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pieces_make_the_whole() {
        let whole: Vec<u8> = (0..50_000u32).map(|i| (i % 241) as u8).collect();
        let mut buffer = BodyBuffer::new(0);
        for piece in whole.chunks(4_099) {
            buffer.push(piece);
        }
        assert_eq!(buffer.len(), whole.len());
        assert_eq!(buffer.finish().as_ref(), whole.as_slice());
    }
}
