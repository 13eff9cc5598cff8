//! Turning a command's output bytes into redacted lines on the output channel.

use tokio::sync::mpsc;

use super::redact::Redactor;
use super::spec::{LogLine, OutputStream};

/// A line longer than this is passed on in pieces, so a runaway line cannot exhaust memory.
const MAX_LINE: usize = 64 * 1024;

/// Splits one stream's bytes into lines, redacts them and sends them.
pub(crate) struct LineSink {
    stream: OutputStream,
    buf: Vec<u8>,
    redactor: Redactor,
    out: mpsc::Sender<LogLine>,
}

impl LineSink {
    pub(crate) fn new(
        stream: OutputStream,
        redactor: Redactor,
        out: mpsc::Sender<LogLine>,
    ) -> Self {
        Self {
            stream,
            buf: Vec::new(),
            redactor,
            out,
        }
    }

    /// Takes more output; complete lines are sent.
    pub(crate) async fn push(&mut self, bytes: &[u8]) {
        self.buf.extend_from_slice(bytes);
        while let Some(pos) = self.buf.iter().position(|&b| b == b'\n') {
            let line: Vec<u8> = self.buf.drain(..=pos).collect();
            self.emit(&line[..line.len() - 1]).await;
        }
        if self.buf.len() > MAX_LINE {
            let piece = std::mem::take(&mut self.buf);
            self.emit(&piece).await;
        }
    }

    /// Sends what is left after the stream ended.
    pub(crate) async fn finish(mut self) {
        if !self.buf.is_empty() {
            let rest = std::mem::take(&mut self.buf);
            self.emit(&rest).await;
        }
    }

    async fn emit(&mut self, raw: &[u8]) {
        let raw = raw.strip_suffix(b"\r").unwrap_or(raw);
        let text = String::from_utf8_lossy(raw);
        if let Some(text) = self.redactor.filter(&text) {
            // A closed receiver means nobody listens any more; the command goes on.
            let _ = self
                .out
                .send(LogLine {
                    stream: self.stream,
                    text,
                })
                .await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn splits_across_chunks_and_redacts() {
        let (tx, mut rx) = mpsc::channel(16);
        let mut sink = LineSink::new(
            OutputStream::Stderr,
            Redactor::new(["topsecret"]).unwrap(),
            tx,
        );
        sink.push(b"one top").await;
        sink.push(b"secret\r\ntwo\nthr").await;
        sink.finish().await;
        let mut got = Vec::new();
        while let Some(l) = rx.recv().await {
            assert_eq!(l.stream, OutputStream::Stderr);
            got.push(l.text);
        }
        assert_eq!(got, ["one ***", "two", "thr"]);
    }
}
