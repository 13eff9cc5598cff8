//! The rules a state write (HTTP backend POST) must satisfy, as one pure decision.

/// What the coordinator knows when a write arrives.
#[derive(Debug, Clone)]
pub struct WriteContext<'a> {
    pub current_generation: u64,
    /// The generation this attempt last read or wrote.
    pub attempt_last_seen: u64,
    /// Serial, lineage and plaintext hash of the current generation (None: no generation).
    pub current: Option<CurrentHeader<'a>>,
}

#[derive(Debug, Clone)]
pub struct CurrentHeader<'a> {
    pub serial: u64,
    pub lineage: &'a str,
    pub plaintext_sha256: &'a str,
}

/// The incoming document.
#[derive(Debug, Clone)]
pub struct Incoming<'a> {
    pub serial: u64,
    pub lineage: &'a str,
    pub plaintext_sha256: &'a str,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum WriteDecision {
    /// Write generation `current + 1`.
    Commit {
        target_generation: u64,
    },
    /// The same serial with the same content is already current: a re-sent write.
    AlreadyCommitted {
        generation: u64,
    },
    Reject(WriteConflict),
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WriteConflict {
    #[error(
        "stale write: the state is at generation {current} but this attempt last saw generation {seen}"
    )]
    Stale { current: u64, seen: u64 },
    #[error("lineage mismatch: the state has lineage {current:?}, the write carries {incoming:?}")]
    Lineage { current: String, incoming: String },
    #[error("serial went back: the state is at serial {current}, the write carries {incoming}")]
    SerialBack { current: u64, incoming: u64 },
    #[error("serial {serial} is already stored with different content")]
    SerialReused { serial: u64 },
}

pub fn decide(ctx: &WriteContext<'_>, incoming: &Incoming<'_>) -> WriteDecision {
    if ctx.current_generation != ctx.attempt_last_seen {
        return WriteDecision::Reject(WriteConflict::Stale {
            current: ctx.current_generation,
            seen: ctx.attempt_last_seen,
        });
    }
    let Some(current) = &ctx.current else {
        return WriteDecision::Commit {
            target_generation: ctx.current_generation + 1,
        };
    };
    if current.lineage != incoming.lineage {
        return WriteDecision::Reject(WriteConflict::Lineage {
            current: current.lineage.to_owned(),
            incoming: incoming.lineage.to_owned(),
        });
    }
    if incoming.serial < current.serial {
        return WriteDecision::Reject(WriteConflict::SerialBack {
            current: current.serial,
            incoming: incoming.serial,
        });
    }
    if incoming.serial == current.serial {
        return if incoming.plaintext_sha256 == current.plaintext_sha256 {
            WriteDecision::AlreadyCommitted {
                generation: ctx.current_generation,
            }
        } else {
            WriteDecision::Reject(WriteConflict::SerialReused {
                serial: incoming.serial,
            })
        };
    }
    WriteDecision::Commit {
        target_generation: ctx.current_generation + 1,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(gen_: u64, seen: u64, serial: u64) -> WriteContext<'static> {
        WriteContext {
            current_generation: gen_,
            attempt_last_seen: seen,
            current: (gen_ > 0).then_some(CurrentHeader {
                serial,
                lineage: "L",
                plaintext_sha256: "h1",
            }),
        }
    }

    fn inc(serial: u64, lineage: &'static str, sha: &'static str) -> Incoming<'static> {
        Incoming {
            serial,
            lineage,
            plaintext_sha256: sha,
        }
    }

    #[test]
    fn first_write_commits_generation_one() {
        assert_eq!(
            decide(&ctx(0, 0, 0), &inc(1, "new", "x")),
            WriteDecision::Commit {
                target_generation: 1
            }
        );
    }

    #[test]
    fn rules() {
        assert_eq!(
            decide(&ctx(3, 3, 5), &inc(6, "L", "h2")),
            WriteDecision::Commit {
                target_generation: 4
            }
        );
        assert_eq!(
            decide(&ctx(3, 3, 5), &inc(5, "L", "h1")),
            WriteDecision::AlreadyCommitted { generation: 3 }
        );
        assert!(matches!(
            decide(&ctx(3, 3, 5), &inc(5, "L", "h2")),
            WriteDecision::Reject(WriteConflict::SerialReused { serial: 5 })
        ));
        assert!(matches!(
            decide(&ctx(3, 3, 5), &inc(4, "L", "h2")),
            WriteDecision::Reject(WriteConflict::SerialBack { .. })
        ));
        assert!(matches!(
            decide(&ctx(3, 3, 5), &inc(6, "other", "h2")),
            WriteDecision::Reject(WriteConflict::Lineage { .. })
        ));
        assert!(matches!(
            decide(&ctx(4, 3, 5), &inc(6, "L", "h2")),
            WriteDecision::Reject(WriteConflict::Stale {
                current: 4,
                seen: 3
            })
        ));
    }
}
