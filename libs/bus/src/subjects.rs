//! Subject and stream names (ARCHITECTURE §9), optionally under a per-test prefix.
//!
//! Production uses [`Namespace::root`]: subjects start with `cairn.` and streams are named
//! `CAIRN_*`. Tests use [`Namespace::with_prefix`] (or [`Namespace::random`]) so that each test
//! gets subjects `<prefix>.cairn.…` and streams `<PREFIX>_CAIRN_*` of its own.

use std::fmt;

/// A subject token or prefix that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SubjectError {
    #[error("{what} must not be empty")]
    Empty { what: &'static str },
    #[error("{what} {value:?} contains {found:?}, which is not allowed in a subject token")]
    InvalidChar {
        what: &'static str,
        value: String,
        found: char,
    },
}

/// Checks that `value` can be used as exactly one subject token: non-empty, no `.`, `*`, `>`,
/// whitespace or control characters.
pub fn validate_token(what: &'static str, value: &str) -> Result<(), SubjectError> {
    if value.is_empty() {
        return Err(SubjectError::Empty { what });
    }
    match value
        .chars()
        .find(|c| matches!(c, '.' | '*' | '>') || c.is_whitespace() || c.is_control())
    {
        Some(found) => Err(SubjectError::InvalidChar {
            what,
            value: value.to_owned(),
            found,
        }),
        None => Ok(()),
    }
}

/// The last token of a target validation request's subject ([`Namespace::runq_validate`]).
const VALIDATE: &str = "validate";

/// The five JetStream streams of Cairn.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum StreamKind {
    /// `CAIRN_EVENTS`: domain events (limits retention, dedup by event id).
    Events,
    /// `CAIRN_RUNQ`: run requests per target, and target validation requests on a subject
    /// of their own (work queue).
    RunQ,
    /// `CAIRN_RUNRES`: run results (limits retention, dedup by run/attempt).
    RunRes,
    /// `CAIRN_RUNLOG`: redacted log lines (limits retention, short max age).
    RunLog,
    /// `CAIRN_DEPLOYQ`: deployment jobs (work queue).
    DeployQ,
}

impl StreamKind {
    pub const ALL: [StreamKind; 5] = [
        StreamKind::Events,
        StreamKind::RunQ,
        StreamKind::RunRes,
        StreamKind::RunLog,
        StreamKind::DeployQ,
    ];

    /// The stream name without any namespace prefix.
    pub fn base_name(self) -> &'static str {
        match self {
            StreamKind::Events => "CAIRN_EVENTS",
            StreamKind::RunQ => "CAIRN_RUNQ",
            StreamKind::RunRes => "CAIRN_RUNRES",
            StreamKind::RunLog => "CAIRN_RUNLOG",
            StreamKind::DeployQ => "CAIRN_DEPLOYQ",
        }
    }

    /// The subject pattern the stream captures, without any namespace prefix.
    fn base_subject(self) -> &'static str {
        match self {
            StreamKind::Events => "cairn.events.>",
            StreamKind::RunQ => "cairn.runq.>",
            StreamKind::RunRes => "cairn.runres.*",
            StreamKind::RunLog => "cairn.runlog.*",
            StreamKind::DeployQ => "cairn.deployq",
        }
    }
}

impl fmt::Display for StreamKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.base_name())
    }
}

/// Where Cairn's subjects and streams live: the production root or a test prefix.
#[derive(Debug, Clone, Default, PartialEq, Eq, Hash)]
pub struct Namespace {
    prefix: Option<String>,
}

impl Namespace {
    /// The production namespace: `cairn.…` subjects, `CAIRN_*` streams.
    pub fn root() -> Self {
        Self { prefix: None }
    }

    /// A namespace under `prefix` (one token of ASCII letters, digits, `_` or `-`), e.g.
    /// `t1a2b3` gives `t1a2b3.cairn.runq.<target>` and stream `T1A2B3_CAIRN_RUNQ`.
    pub fn with_prefix(prefix: &str) -> Result<Self, SubjectError> {
        validate_token("namespace prefix", prefix)?;
        if let Some(found) = prefix
            .chars()
            .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '-')))
        {
            return Err(SubjectError::InvalidChar {
                what: "namespace prefix",
                value: prefix.to_owned(),
                found,
            });
        }
        Ok(Self {
            prefix: Some(prefix.to_owned()),
        })
    }

    /// A fresh random prefix (`t` + 12 hex digits), for a test of its own.
    pub fn random() -> Self {
        let id = uuid::Uuid::new_v4().simple().to_string();
        Self {
            prefix: Some(format!("t{}", &id[..12])),
        }
    }

    /// The prefix, if any.
    pub fn prefix(&self) -> Option<&str> {
        self.prefix.as_deref()
    }

    /// `subject` (a subject of the root namespace, e.g. `cairn.runq.<target>`) in this
    /// namespace: what the message outbox stores is namespace-free, the relay qualifies it.
    pub fn qualify(&self, subject: &str) -> String {
        self.subject(subject)
    }

    fn subject(&self, rest: &str) -> String {
        match &self.prefix {
            Some(p) => format!("{p}.{rest}"),
            None => rest.to_owned(),
        }
    }

    /// `[<prefix>.]cairn.events.<tenant>.<aggregate>.<event>`.
    pub fn events_subject(
        &self,
        tenant: &str,
        aggregate: &str,
        event: &str,
    ) -> Result<String, SubjectError> {
        validate_token("tenant", tenant)?;
        validate_token("aggregate", aggregate)?;
        validate_token("event type", event)?;
        Ok(self.subject(&format!("cairn.events.{tenant}.{aggregate}.{event}")))
    }

    /// A filter over domain events; `None` parts match any token (`*`).
    /// `events_filter(None, None, None)` matches every event.
    pub fn events_filter(
        &self,
        tenant: Option<&str>,
        aggregate: Option<&str>,
        event: Option<&str>,
    ) -> Result<String, SubjectError> {
        let part = |what, v: Option<&str>| -> Result<String, SubjectError> {
            match v {
                Some(v) => validate_token(what, v).map(|()| v.to_owned()),
                None => Ok("*".to_owned()),
            }
        };
        if tenant.is_none() && aggregate.is_none() && event.is_none() {
            return Ok(self.subject("cairn.events.>"));
        }
        Ok(self.subject(&format!(
            "cairn.events.{}.{}.{}",
            part("tenant", tenant)?,
            part("aggregate", aggregate)?,
            part("event type", event)?
        )))
    }

    /// `[<prefix>.]cairn.runq.<target>`: run requests for one target.
    pub fn runq(&self, target: &str) -> Result<String, SubjectError> {
        validate_token("target", target)?;
        Ok(self.subject(&format!("cairn.runq.{target}")))
    }

    /// `[<prefix>.]cairn.runq.*`: every target's run requests (and only those: a
    /// validation request has one token more), what the run-requesting services may publish.
    pub fn runq_filter(&self) -> String {
        self.subject("cairn.runq.*")
    }

    /// `[<prefix>.]cairn.runq.<target>.validate`: target validation requests for one target,
    /// on the run queue stream but a subject of their own, so that a NATS user may publish
    /// them without publishing run requests, and a runner consumes them apart (filters of a
    /// work queue's consumers must not overlap, and `cairn.runq.<target>` does not match).
    pub fn runq_validate(&self, target: &str) -> Result<String, SubjectError> {
        validate_token("target", target)?;
        Ok(self.subject(&format!("cairn.runq.{target}.{VALIDATE}")))
    }

    /// `[<prefix>.]cairn.runq.*.validate`: every target's validation requests.
    pub fn runq_validate_filter(&self) -> String {
        self.subject(&format!("cairn.runq.*.{VALIDATE}"))
    }

    /// `[<prefix>.]cairn.runres.<run_id>`: results of one run.
    pub fn runres(&self, run_id: &str) -> Result<String, SubjectError> {
        validate_token("run id", run_id)?;
        Ok(self.subject(&format!("cairn.runres.{run_id}")))
    }

    /// `[<prefix>.]cairn.runlog.<run_id>`: redacted log lines of one run.
    pub fn runlog(&self, run_id: &str) -> Result<String, SubjectError> {
        validate_token("run id", run_id)?;
        Ok(self.subject(&format!("cairn.runlog.{run_id}")))
    }

    /// `[<prefix>.]cairn.runctl.<run_id>`: cancel requests (core NATS, no stream).
    pub fn runctl(&self, run_id: &str) -> Result<String, SubjectError> {
        validate_token("run id", run_id)?;
        Ok(self.subject(&format!("cairn.runctl.{run_id}")))
    }

    /// `[<prefix>.]cairn.runctl.*`: every cancel request, for a runner's one subscription.
    pub fn runctl_filter(&self) -> String {
        self.subject("cairn.runctl.*")
    }

    /// `[<prefix>.]cairn.deployq`: deployment jobs.
    pub fn deployq(&self) -> String {
        self.subject("cairn.deployq")
    }

    /// The subject pattern a stream captures, e.g. `[<prefix>.]cairn.runq.>`; also the
    /// filter a consumer uses to see everything in the stream.
    pub fn stream_subject(&self, kind: StreamKind) -> String {
        self.subject(kind.base_subject())
    }

    /// `[<PREFIX>_]CAIRN_…`.
    pub fn stream_name(&self, kind: StreamKind) -> String {
        match &self.prefix {
            Some(p) => format!("{}_{}", p.to_ascii_uppercase(), kind.base_name()),
            None => kind.base_name().to_owned(),
        }
    }

    pub fn events_stream(&self) -> String {
        self.stream_name(StreamKind::Events)
    }
    pub fn runq_stream(&self) -> String {
        self.stream_name(StreamKind::RunQ)
    }
    pub fn runres_stream(&self) -> String {
        self.stream_name(StreamKind::RunRes)
    }
    pub fn runlog_stream(&self) -> String {
        self.stream_name(StreamKind::RunLog)
    }
    pub fn deployq_stream(&self) -> String {
        self.stream_name(StreamKind::DeployQ)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_subjects_and_streams() {
        let ns = Namespace::root();
        assert_eq!(
            ns.events_subject("ten1", "state", "generation_committed")
                .expect("valid tokens"),
            "cairn.events.ten1.state.generation_committed"
        );
        assert_eq!(ns.runq("aws-prod").expect("valid"), "cairn.runq.aws-prod");
        assert_eq!(
            ns.runq_validate("aws-prod").expect("valid"),
            "cairn.runq.aws-prod.validate"
        );
        assert_eq!(ns.runq_filter(), "cairn.runq.*");
        assert_eq!(ns.runq_validate_filter(), "cairn.runq.*.validate");
        assert_eq!(ns.stream_subject(StreamKind::RunQ), "cairn.runq.>");
        assert_eq!(ns.runres("r1").expect("valid"), "cairn.runres.r1");
        assert_eq!(ns.runlog("r1").expect("valid"), "cairn.runlog.r1");
        assert_eq!(ns.runctl("r1").expect("valid"), "cairn.runctl.r1");
        assert_eq!(ns.deployq(), "cairn.deployq");
        assert_eq!(ns.events_stream(), "CAIRN_EVENTS");
        assert_eq!(ns.runq_stream(), "CAIRN_RUNQ");
        assert_eq!(ns.runres_stream(), "CAIRN_RUNRES");
        assert_eq!(ns.runlog_stream(), "CAIRN_RUNLOG");
        assert_eq!(ns.deployq_stream(), "CAIRN_DEPLOYQ");
        assert_eq!(ns.stream_subject(StreamKind::Events), "cairn.events.>");
        assert_eq!(ns.stream_subject(StreamKind::DeployQ), "cairn.deployq");
    }

    #[test]
    fn prefixed_subjects_and_streams() {
        let ns = Namespace::with_prefix("t1a2b3").expect("valid prefix");
        assert_eq!(
            ns.events_subject("_", "state", "recovered").expect("valid"),
            "t1a2b3.cairn.events._.state.recovered"
        );
        assert_eq!(ns.runq("tgt").expect("valid"), "t1a2b3.cairn.runq.tgt");
        assert_eq!(
            ns.runq_validate("tgt").expect("valid"),
            "t1a2b3.cairn.runq.tgt.validate"
        );
        assert_eq!(ns.deployq(), "t1a2b3.cairn.deployq");
        assert_eq!(ns.events_stream(), "T1A2B3_CAIRN_EVENTS");
        assert_eq!(ns.runq_stream(), "T1A2B3_CAIRN_RUNQ");
        assert_eq!(
            ns.stream_subject(StreamKind::RunRes),
            "t1a2b3.cairn.runres.*"
        );
    }

    #[test]
    fn events_filters() {
        let ns = Namespace::root();
        assert_eq!(
            ns.events_filter(None, None, None).expect("valid"),
            "cairn.events.>"
        );
        assert_eq!(
            ns.events_filter(Some("t"), None, None).expect("valid"),
            "cairn.events.t.*.*"
        );
        assert_eq!(
            ns.events_filter(None, Some("state"), Some("recovered"))
                .expect("valid"),
            "cairn.events.*.state.recovered"
        );
        assert!(ns.events_filter(Some("a.b"), None, None).is_err());
    }

    #[test]
    fn invalid_tokens_are_refused() {
        let ns = Namespace::root();
        for bad in ["", "a.b", "a*", ">", "a b", "a\tb", "a\nb", "\u{7f}"] {
            assert!(ns.runq(bad).is_err(), "{bad:?} accepted");
            assert!(ns.runq_validate(bad).is_err(), "{bad:?} accepted");
            assert!(
                ns.events_subject("t", bad, "e").is_err(),
                "{bad:?} accepted"
            );
        }
        assert_eq!(ns.runq(""), Err(SubjectError::Empty { what: "target" }));
        assert_eq!(
            ns.runres("x.y"),
            Err(SubjectError::InvalidChar {
                what: "run id",
                value: "x.y".into(),
                found: '.'
            })
        );
    }

    #[test]
    fn prefixes_are_checked() {
        assert!(Namespace::with_prefix("ok_1-a").is_ok());
        for bad in ["", "a.b", "a>", "a b", "é", "a/b"] {
            assert!(Namespace::with_prefix(bad).is_err(), "{bad:?} accepted");
        }
        let a = Namespace::random();
        let b = Namespace::random();
        assert_ne!(a, b);
        let p = a.prefix().expect("random has a prefix");
        assert!(Namespace::with_prefix(p).is_ok());
    }
}
