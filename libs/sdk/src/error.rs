//! What an SDK call can fail with: the server's refusal (its status, message and typed
//! `cairn-reason`), a credential that could not be turned into an access token, or a bad
//! endpoint. `Display` is one line meant for people: the server's message, its code and
//! reason, never a debug dump.
use std::fmt;

use cairn_contract::{REASON_METADATA, RefusalReason};
use tonic::Code;

use crate::endpoints::Endpoint;
use crate::rpc::Rpc;
use crate::token::SdkError;

/// An SDK call failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The server (or the transport to it) answered with an error status.
    #[error("{}", status_line(*.endpoint, .url, .status))]
    Status {
        rpc: Rpc,
        endpoint: Endpoint,
        url: String,
        status: tonic::Status,
    },
    /// The credential could not be turned into an access token.
    #[error("{}", credential_line(.0))]
    Credential(#[source] SdkError),
    /// The call needs a credential and the client has none.
    #[error(
        "not logged in: no API token or access token (run `cairn login` or set CAIRN_API_TOKEN)"
    )]
    NoCredential,
    /// An endpoint URL is not a valid URL.
    #[error("the {endpoint} endpoint {url:?} is not a valid URL")]
    InvalidEndpoint { endpoint: Endpoint, url: String },
    /// A reply did not hold what the contract promises (a missing field).
    #[error("{rpc} answered without {what}")]
    Incomplete { rpc: Rpc, what: &'static str },
    /// The client TLS settings (`CAIRN_TLS_CA`, `CAIRN_TLS_CLIENT_*`) could not be used.
    #[error("client TLS")]
    Tls(#[source] crate::tls::TlsSettingError),
}

impl Error {
    /// The gRPC status behind the error, if the server (or the transport) gave one.
    pub fn status(&self) -> Option<&tonic::Status> {
        match self {
            Error::Status { status, .. } => Some(status),
            Error::Credential(SdkError::Exchange(status)) => Some(status),
            _ => None,
        }
    }

    /// The gRPC status behind the error; an error without one (no credential, a bad
    /// endpoint, an incomplete answer) becomes a status of [`Error::code`] with this
    /// error's text. For a service that maps a peer's answer the way it maps a status.
    pub fn into_status(self) -> tonic::Status {
        match self {
            Error::Status { status, .. } => status,
            Error::Credential(SdkError::Exchange(status)) => status,
            other => tonic::Status::new(other.code(), other.to_string()),
        }
    }

    /// The status code (UNAUTHENTICATED for a credential problem without a status).
    pub fn code(&self) -> Code {
        match self {
            Error::Credential(SdkError::Exchange(s)) => s.code(),
            Error::Status { status, .. } => status.code(),
            Error::Credential(_) | Error::NoCredential => Code::Unauthenticated,
            Error::InvalidEndpoint { .. } | Error::Tls(_) => Code::InvalidArgument,
            Error::Incomplete { .. } => Code::Internal,
        }
    }

    /// The raw `cairn-reason` code the server attached, if any (also codes this SDK does
    /// not know yet).
    pub fn reason_code(&self) -> Option<&str> {
        self.status().and_then(reason_code)
    }

    /// The typed refusal reason, when the server attached a known one.
    pub fn reason(&self) -> Option<RefusalReason> {
        self.reason_code().and_then(RefusalReason::from_code)
    }

    /// The server's message (or this error's text when there is no status).
    pub fn message(&self) -> String {
        match self.status() {
            Some(s) => s.message().to_owned(),
            None => self.to_string(),
        }
    }

    /// NOT_FOUND.
    pub fn is_not_found(&self) -> bool {
        self.code() == Code::NotFound
    }

    /// The server does not implement the RPC (yet).
    pub fn is_unimplemented(&self) -> bool {
        self.code() == Code::Unimplemented
    }
}

/// The `cairn-reason` metadata of a status.
pub fn reason_code(status: &tonic::Status) -> Option<&str> {
    status
        .metadata()
        .get(REASON_METADATA)
        .and_then(|v| v.to_str().ok())
        .filter(|s| !s.is_empty())
}

/// Whether `status` says the connection failed rather than the peer answering: UNAVAILABLE,
/// or any status tonic built from a transport error (a connection that broke under the call
/// is UNKNOWN "transport error"; tonic keeps the error as the status's source, which a status
/// the peer answered with never has). Asking again, on a new connection, may succeed.
pub fn connection_failed(status: &tonic::Status) -> bool {
    status.code() == Code::Unavailable || std::error::Error::source(status).is_some()
}

/// The typed refusal reason of a status (the SDK's equivalent of the services'
/// `reason_of`).
pub fn reason_of(status: &tonic::Status) -> Option<RefusalReason> {
    reason_code(status).and_then(RefusalReason::from_code)
}

/// The canonical upper-case name of a code (`NOT_FOUND`).
pub fn code_name(code: Code) -> &'static str {
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "CANCELLED",
        Code::Unknown => "UNKNOWN",
        Code::InvalidArgument => "INVALID_ARGUMENT",
        Code::DeadlineExceeded => "DEADLINE_EXCEEDED",
        Code::NotFound => "NOT_FOUND",
        Code::AlreadyExists => "ALREADY_EXISTS",
        Code::PermissionDenied => "PERMISSION_DENIED",
        Code::ResourceExhausted => "RESOURCE_EXHAUSTED",
        Code::FailedPrecondition => "FAILED_PRECONDITION",
        Code::Aborted => "ABORTED",
        Code::OutOfRange => "OUT_OF_RANGE",
        Code::Unimplemented => "UNIMPLEMENTED",
        Code::Internal => "INTERNAL",
        Code::Unavailable => "UNAVAILABLE",
        Code::DataLoss => "DATA_LOSS",
        Code::Unauthenticated => "UNAUTHENTICATED",
    }
}

/// One line: newlines of a multi-line message are joined with "; ".
fn one_line(s: &str) -> String {
    s.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect::<Vec<_>>()
        .join("; ")
}

/// The innermost cause of a transport failure ("Connection refused"), which tonic keeps in
/// the status's source chain rather than its message.
fn root_cause(status: &tonic::Status) -> Option<String> {
    let mut source = std::error::Error::source(status)?;
    while let Some(next) = source.source() {
        source = next;
    }
    Some(source.to_string())
}

struct StatusLine<'a>(&'a tonic::Status);

impl fmt::Display for StatusLine<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let s = self.0;
        let message = one_line(s.message());
        if message.is_empty() {
            f.write_str("the call failed")?;
        } else {
            f.write_str(&message)?;
        }
        write!(f, " ({}", code_name(s.code()))?;
        if let Some(reason) = reason_code(s) {
            write!(f, ", reason {reason}")?;
        }
        f.write_str(")")
    }
}

fn status_line(endpoint: Endpoint, url: &str, status: &tonic::Status) -> String {
    match status.code() {
        Code::Unavailable | Code::DeadlineExceeded | Code::Unknown
            if status.metadata().get(REASON_METADATA).is_none() =>
        {
            let cause = root_cause(status)
                .filter(|c| !status.message().contains(c.as_str()))
                .map(|c| format!(": {}", one_line(&c)))
                .unwrap_or_default();
            format!("{endpoint} at {url}: {}{cause}", StatusLine(status))
        }
        _ => StatusLine(status).to_string(),
    }
}

fn credential_line(err: &SdkError) -> String {
    match err {
        SdkError::Exchange(status) => format!(
            "the API token was refused by tenancy: {}",
            StatusLine(status)
        ),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_is_one_line_with_code_and_reason() {
        let mut status = tonic::Status::failed_precondition("state is fenced\nrecover it first");
        status
            .metadata_mut()
            .insert(REASON_METADATA, "fenced".parse().expect("ascii"));
        let err = Error::Status {
            rpc: Rpc::AdmitRun,
            endpoint: Endpoint::State,
            url: "http://x".into(),
            status,
        };
        assert_eq!(
            err.to_string(),
            "state is fenced; recover it first (FAILED_PRECONDITION, reason fenced)"
        );
        assert_eq!(err.reason(), Some(RefusalReason::Fenced));

        let err = Error::Status {
            rpc: Rpc::GetTenant,
            endpoint: Endpoint::Tenancy,
            url: "http://127.0.0.1:1".into(),
            status: tonic::Status::unavailable("connection refused"),
        };
        assert_eq!(
            err.to_string(),
            "tenancy at http://127.0.0.1:1: connection refused (UNAVAILABLE)"
        );
        assert_eq!(err.reason(), None);

        let err = Error::Credential(SdkError::Exchange(tonic::Status::unauthenticated(
            "invalid API token",
        )));
        assert_eq!(
            err.to_string(),
            "the API token was refused by tenancy: invalid API token (UNAUTHENTICATED)"
        );
        assert_eq!(err.code(), Code::Unauthenticated);
    }
}
