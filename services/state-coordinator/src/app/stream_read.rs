//! A GET of a generation in the chunked envelope, streamed: the object's bytes are opened
//! chunk by chunk as they arrive from the object store and each authenticated chunk goes to
//! the client at once, so the read, the decryption and the answer overlap instead of
//! following each other.
//!
//! What a client can observe stays what a whole read gives it:
//! - Nothing is answered before the first chunk is authenticated. Any failure up to then
//!   (a missing object, a tag that does not verify, an outage) falls back to the whole
//!   read ([`App::read_generation`]), which answers, classifies and fences exactly as before.
//!   A state of one chunk (up to 64 KiB) is thus authenticated whole before its answer.
//! - The answer announces the plaintext's length (Content-Length), and its last chunk goes
//!   out only after the final tag verified and the attempt's read mark is recorded. A later
//!   chunk that fails aborts the answer short of its length (no HTTP client takes it as the
//!   whole state), and damage fences the state through the whole read, as it would have.
use std::time::Instant;

use bytes::Bytes;
use cairn_storage::{ChunkOpener, ObjectError, ObjectStream};
use futures::StreamExt as _;
use tokio::sync::mpsc;
use tracing::Instrument as _;

use super::App;
use super::payload::{aad_generation, context};
use super::read_ahead::CurrentObject;
use crate::error::{Error, Result};
use crate::store::attempts;
use crate::store::generations::GenerationRow;
use crate::store::states::StateRow;

/// How many authenticated chunks may wait for the client (64 KiB each).
const CHUNKS_AHEAD: usize = 4;

/// A state's body as a GET answers it.
pub enum StateBody {
    /// Read, opened and checked whole.
    Whole(Vec<u8>),
    /// The first authenticated chunk, then the rest as it is opened; `len` bytes in all.
    Streamed {
        len: u64,
        first: Bytes,
        rest: mpsc::Receiver<Result<Bytes>>,
    },
}

/// What a GET records once its reader has the whole body.
#[derive(Debug, Clone, Copy)]
pub struct AfterRead {
    /// The reader is the lock holder of a run that writes next: ask for its data key.
    pub write_follows: bool,
    /// The reader's attempt and whether its read mark must move to this generation.
    pub attempt_id: uuid::Uuid,
    pub move_mark: bool,
}

impl App {
    /// Reads generation `g` of `state` for a GET, streamed when it is chunked; `fetched`
    /// is the object's read already started, if any.
    pub(crate) async fn read_for_get(
        &self,
        state: StateRow,
        g: GenerationRow,
        fetched: Option<ObjectStream>,
        after: AfterRead,
    ) -> Result<StateBody> {
        let generation = u64::try_from(g.generation).unwrap_or(0);
        let aad = aad_generation(state.state_id, generation);
        let ctx = context(state.tenant_id, state.state_id);
        // Anything off the streaming path's happy start goes the whole way, which tells
        // damage from trouble and fences.
        let Ok(key) = self.data_key(&g.key_id, &g.wrapped_key, &ctx).await else {
            return self.read_whole(&state, &g, None, after).await;
        };
        let opener = match ChunkOpener::for_stored(key.expose(), &g.nonce, &aad) {
            Ok(Some(opener)) => opener,
            // A single-seal generation (written before the chunked envelope) opens whole.
            Ok(None) => {
                let bytes = match fetched {
                    Some(stream) => collect(stream).await.ok(),
                    None => None,
                };
                return self.read_whole(&state, &g, bytes, after).await;
            }
            Err(_) => return self.read_whole(&state, &g, None, after).await,
        };
        let stream = match fetched {
            Some(stream) => stream,
            None => match self
                .objects
                .get_stream(&g.object_key, &g.object_version)
                .await
            {
                Ok(stream) => stream,
                Err(_) => return self.read_whole(&state, &g, None, after).await,
            },
        };
        let Some(len) = usize::try_from(stream.len)
            .ok()
            .and_then(|sealed| cairn_storage::chunked::plaintext_len(sealed).ok())
        else {
            return self.read_whole(&state, &g, None, after).await;
        };
        let (tx, mut rx) = mpsc::channel(CHUNKS_AHEAD);
        let pump = Pump {
            app: self.clone(),
            state: state.clone(),
            g: g.clone(),
            after,
            tx,
            sent_any: false,
        };
        tokio::spawn(
            pump.run(opener, stream)
                .instrument(tracing::Span::current()),
        );
        match rx.recv().await {
            Some(Ok(first)) => Ok(StateBody::Streamed {
                len: len as u64,
                first,
                rest: rx,
            }),
            // Nothing was answered yet: the whole read decides what to say.
            Some(Err(_)) | None => self.read_whole(&state, &g, None, after).await,
        }
    }

    async fn read_whole(
        &self,
        state: &StateRow,
        g: &GenerationRow,
        fetched: Option<Bytes>,
        after: AfterRead,
    ) -> Result<StateBody> {
        let body = self.read_generation_fetched(state, g, fetched).await?;
        self.after_read(state, g, after).await?;
        Ok(StateBody::Whole(body))
    }

    /// Once the reader has (or is about to have) the whole body: the next write's key asked
    /// for, the object remembered as current, the attempt's read mark moved.
    async fn after_read(
        &self,
        state: &StateRow,
        g: &GenerationRow,
        after: AfterRead,
    ) -> Result<()> {
        if after.write_follows {
            self.ask_write_key_ahead(state.tenant_id, state.state_id);
        }
        self.read_ahead
            .current_is(state.state_id, CurrentObject::of(g));
        // Only this attempt moves its own mark, and only forward: when it already names this
        // generation (the attempt wrote or read it before), there is nothing to record.
        if after.move_mark {
            let mut conn = self.pool.acquire().await?;
            attempts::attempt_saw(&mut conn, after.attempt_id, state.current_generation).await?;
        }
        Ok(())
    }
}

async fn collect(mut stream: ObjectStream) -> std::result::Result<Bytes, ObjectError> {
    let mut buffer = Vec::with_capacity(usize::try_from(stream.len).unwrap_or(0));
    while let Some(piece) = stream.body.next().await {
        buffer.extend_from_slice(&piece?);
    }
    Ok(Bytes::from(buffer))
}

/// Moves one object from the store through the opener to the answer.
struct Pump {
    app: App,
    state: StateRow,
    g: GenerationRow,
    after: AfterRead,
    tx: mpsc::Sender<Result<Bytes>>,
    sent_any: bool,
}

/// Why the pump stopped early.
enum Stop {
    /// The client went away: nothing to report.
    Gone,
    Failed(Error),
}

impl Pump {
    async fn run(mut self, opener: ChunkOpener, stream: ObjectStream) {
        let start = Instant::now();
        let outcome = self.pump(opener, stream).await;
        let label = if outcome.is_ok() { "ok" } else { "error" };
        metrics::histogram!(crate::metrics::READ_DURATION, "outcome" => label)
            .record(start.elapsed().as_secs_f64());
        let Err(Stop::Failed(error)) = outcome else {
            return;
        };
        // Before the first chunk the reader falls back to the whole read, which fences on
        // damage; after it, the whole read is done here for its verdict (and its fence).
        let error = if self.sent_any {
            match self.app.read_generation(&self.state, &self.g).await {
                Err(verdict) => verdict,
                Ok(_) => error,
            }
        } else {
            error
        };
        tracing::warn!(state_id = %self.state.state_id, generation = self.g.generation, %error, "streamed state read failed");
        drop(self.tx.send(Err(error)).await);
    }

    async fn pump(
        &mut self,
        mut opener: ChunkOpener,
        mut stream: ObjectStream,
    ) -> std::result::Result<(), Stop> {
        let (generation, object_key) = (self.g.generation, self.g.object_key.clone());
        // Its verdict comes from the whole read (Pump::run): damage or not, and the fence.
        let damage = |e: cairn_storage::EnvelopeError| {
            Stop::Failed(Error::unavailable(format!(
                "generation {generation} of {object_key} did not authenticate: {e}"
            )))
        };
        while let Some(piece) = stream.body.next().await {
            let piece = piece
                .map_err(|e| Stop::Failed(Error::unavailable(format!("object storage: {e}"))))?;
            for plain in opener.push(&piece).map_err(&damage)? {
                self.send(plain).await?;
            }
        }
        let last = opener.finish().map_err(damage)?;
        self.app
            .after_read(&self.state, &self.g, self.after)
            .await
            .map_err(Stop::Failed)?;
        self.send(last).await
    }

    async fn send(&mut self, plain: Bytes) -> std::result::Result<(), Stop> {
        self.tx.send(Ok(plain)).await.map_err(|_| Stop::Gone)?;
        self.sent_any = true;
        Ok(())
    }
}
