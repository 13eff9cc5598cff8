//! The OpenTofu HTTP backend: `/v1/states/{state_id}` (GET, POST) and
//! `/v1/states/{state_id}/lock` (LOCK, UNLOCK), authenticated with a run token as the
//! basic-auth password. Status codes follow ARCHITECTURE.md §4 and tofu's client
//! (../shared/tofu-fixtures/http-backend/CLIENT.md): never 404 for a state the token does
//! not own, 503 for transient trouble (tofu retries), 4xx for everything tofu must not retry.
use std::collections::HashMap;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::rejection::QueryRejection;
use axum::extract::{DefaultBodyLimit, Path, Query, State};
use axum::http::{HeaderMap, HeaderValue, Method, StatusCode, header};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use cairn_contract::StateId;
use cairn_service::BaseError;
use uuid::Uuid;

use crate::app::App;
use crate::app::backend::Caller;
use crate::domain::content_md5;
use crate::error::Error;

/// The largest LockInfo accepted, in bytes (tofu's is a few hundred).
pub const MAX_LOCK_INFO_BYTES: usize = 4 * 1024;
/// The longest lock `ID` accepted, in characters (tofu's is a UUID).
pub const MAX_LOCK_ID_CHARS: usize = 256;

/// Builds the router; bodies above the state limit are refused with 413 before reading.
pub fn router(app: App) -> Router {
    let limit = app.settings.max_state_bytes.saturating_add(1024);
    Router::new()
        .route("/v1/states/{state_id}", any(state_handler))
        .route("/v1/states/{state_id}/lock", any(lock_handler))
        .layer(DefaultBodyLimit::max(limit))
        .layer(crate::metrics::BACKEND_LAYER)
        .with_state(app)
}

/// The HTTP status for each error; the body is the reason (a LockInfo for 423).
pub fn status(err: &Error) -> StatusCode {
    match err {
        Error::Base(b) => match b {
            BaseError::Unauthenticated(_) => StatusCode::UNAUTHORIZED,
            // Another state's token, read-only tokens, and anything we would call "not
            // found": a 404 would make tofu plan to create everything again.
            BaseError::PermissionDenied(_) | BaseError::NotFound(_) => StatusCode::FORBIDDEN,
            BaseError::AlreadyExists(_)
            | BaseError::FailedPrecondition(_)
            | BaseError::Conflict(_)
            | BaseError::Aborted(_) => StatusCode::CONFLICT,
            BaseError::InvalidArgument(_) => StatusCode::BAD_REQUEST,
            BaseError::Unavailable(_) => StatusCode::SERVICE_UNAVAILABLE,
            BaseError::Internal(_) => StatusCode::INTERNAL_SERVER_ERROR,
        },
        Error::Fenced { .. } => StatusCode::UNPROCESSABLE_ENTITY,
        Error::Stale { .. } => StatusCode::PRECONDITION_FAILED,
        Error::Locked { .. } => StatusCode::LOCKED,
        Error::WriteConflict(_)
        | Error::RunFinished { .. }
        | Error::Superseded { .. }
        | Error::AfterRestore
        | Error::LeaseHeld { .. } => StatusCode::CONFLICT,
        Error::TooLarge { .. } => StatusCode::PAYLOAD_TOO_LARGE,
    }
}

fn error_response(err: Error) -> Response {
    let code = status(&err);
    match err {
        Error::Locked { holder, .. } => (
            code,
            [(header::CONTENT_TYPE, "application/json")],
            holder.to_string(),
        )
            .into_response(),
        Error::Base(BaseError::Unauthenticated(msg)) => (
            code,
            [(
                header::WWW_AUTHENTICATE,
                HeaderValue::from_static("Basic realm=\"cairn\""),
            )],
            msg,
        )
            .into_response(),
        Error::Base(BaseError::Unavailable(msg)) => {
            tracing::warn!(reason = %msg, "backend request unavailable");
            (
                code,
                [(header::RETRY_AFTER, HeaderValue::from_static("1"))],
                msg,
            )
                .into_response()
        }
        Error::Base(BaseError::Internal(msg)) => {
            tracing::error!(error = %msg, "backend request failed");
            (code, "internal error").into_response()
        }
        other => (code, other.to_string()).into_response(),
    }
}

fn run_token(headers: &HeaderMap) -> Result<String, Error> {
    let missing = || {
        Error::unauthenticated(
            "basic auth with username \"run\" and the run token is required".to_owned(),
        )
    };
    let value = headers
        .get(header::AUTHORIZATION)
        .and_then(|v| v.to_str().ok())
        .ok_or_else(missing)?;
    let encoded = value
        .strip_prefix("Basic ")
        .or_else(|| value.strip_prefix("basic "))
        .ok_or_else(missing)?;
    let decoded = STANDARD.decode(encoded.trim()).map_err(|_| missing())?;
    let decoded = String::from_utf8(decoded).map_err(|_| missing())?;
    match decoded.split_once(':') {
        Some(("run", token)) if !token.is_empty() => Ok(token.to_owned()),
        _ => Err(missing()),
    }
}

async fn authenticate(app: &App, headers: &HeaderMap, state_id: &str) -> Result<Caller, Error> {
    app.backend_caller(&run_token(headers)?, url_state(state_id))
        .await
}

/// A state body received into one buffer sized from its Content-Length (nothing else is done
/// while it arrives: its checks run beside its copy being stored); more than `limit` bytes is
/// 413, announced or not.
async fn read_body(headers: &HeaderMap, body: Body, limit: usize) -> Result<Bytes, Error> {
    use futures::StreamExt as _;
    let too_large = |size| Error::TooLarge { size, limit };
    let announced = headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<usize>().ok());
    if let Some(size) = announced
        && size > limit
    {
        return Err(too_large(size));
    }
    let mut buffer = Vec::with_capacity(announced.unwrap_or(0));
    let mut chunks = body.into_data_stream();
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|_| {
            Error::invalid_argument("the request body could not be read".to_owned())
        })?;
        if buffer.len() + chunk.len() > limit {
            return Err(too_large(buffer.len() + chunk.len()));
        }
        buffer.extend_from_slice(&chunk);
    }
    Ok(Bytes::from(buffer))
}

fn content_md5(headers: &HeaderMap) -> Option<&[u8]> {
    headers.get("content-md5").map(HeaderValue::as_bytes)
}

/// A malformed id can never be this token's state: 403, like any other foreign state.
fn url_state(state_id: &str) -> StateId {
    StateId::parse("state_id", state_id).unwrap_or(StateId::from(Uuid::nil()))
}

fn parse_query(
    query: Result<Query<HashMap<String, String>>, QueryRejection>,
) -> Result<HashMap<String, String>, Error> {
    // axum's own rejection text quotes the request; ours names the problem only.
    query.map(|Query(q)| q).map_err(|_| {
        Error::invalid_argument("the query string is not a list of key=value pairs".to_owned())
    })
}

#[tracing::instrument(skip_all, fields(state_id = %state_id, method = %method))]
async fn state_handler(
    State(app): State<App>,
    Path(state_id): Path<String>,
    query: Result<Query<HashMap<String, String>>, QueryRejection>,
    method: Method,
    headers: HeaderMap,
    body: Body,
) -> Response {
    let result = async {
        // Each method resolves the token with the one statement it needs anyway.
        let state_id = url_state(&state_id);
        match method.as_str() {
            "GET" => {
                let read = app.backend_read(&run_token(&headers)?, state_id).await?;
                parse_query(query)?;
                Ok(match app.backend_get(read).await? {
                    Some(state) => {
                        ([(header::CONTENT_TYPE, "application/json")], state).into_response()
                    }
                    None => (StatusCode::NOT_FOUND, "no state yet").into_response(),
                })
            }
            "POST" | "PUT" => {
                // The body arrives while the write is checked (and its data key asked for).
                let token = run_token(&headers)?;
                let (body, checks) = tokio::join!(
                    read_body(&headers, body, app.settings.max_state_bytes),
                    app.backend_write_checks(&token, state_id)
                );
                // A body that could not be received leaves a data key asked for meanwhile
                // to the state's next write.
                let (body, checks) = (body?, checks?);
                let query = parse_query(query)?;
                let lock_id = query.get("ID").map(String::as_str).unwrap_or_default();
                let md5 = content_md5(&headers).map(<[u8]>::to_vec);
                app.backend_post(checks, lock_id, body, md5).await?;
                Ok(StatusCode::OK.into_response())
            }
            _ => {
                app.backend_caller(&run_token(&headers)?, state_id).await?;
                parse_query(query)?;
                Ok((StatusCode::METHOD_NOT_ALLOWED, "use GET or POST").into_response())
            }
        }
    }
    .await;
    result.unwrap_or_else(error_response)
}

/// A serde_json error as its category and position only: serde's message can quote the
/// input (`invalid type: string "…"`), and a 400 body never echoes what the request carried.
pub(crate) fn json_error(what: &str, e: &serde_json::Error) -> String {
    let kind = match e.classify() {
        serde_json::error::Category::Io => "unreadable",
        serde_json::error::Category::Syntax => "not valid JSON",
        serde_json::error::Category::Data => "JSON of the wrong shape",
        serde_json::error::Category::Eof => "truncated JSON",
    };
    format!(
        "{what} is {kind} at line {}, column {}",
        e.line(),
        e.column()
    )
}

/// The LockInfo of a LOCK or UNLOCK, bounded: at most [`MAX_LOCK_INFO_BYTES`] of JSON
/// with a non-empty string `ID` of at most [`MAX_LOCK_ID_CHARS`] characters. Refused
/// (400) before anything is stored.
fn parse_lock_info(body: &[u8]) -> Result<(String, serde_json::Value), Error> {
    if body.len() > MAX_LOCK_INFO_BYTES {
        return Err(Error::invalid_argument(format!(
            "LockInfo is {} bytes, the limit is {MAX_LOCK_INFO_BYTES}",
            body.len()
        )));
    }
    let info: serde_json::Value = serde_json::from_slice(body)
        .map_err(|e| Error::invalid_argument(json_error("LockInfo", &e)))?;
    let lock_id = info
        .get("ID")
        .and_then(|v| v.as_str())
        .filter(|s| !s.is_empty())
        .ok_or_else(|| Error::invalid_argument("LockInfo needs a non-empty ID".to_owned()))?;
    let chars = lock_id.chars().count();
    if chars > MAX_LOCK_ID_CHARS {
        return Err(Error::invalid_argument(format!(
            "LockInfo ID is {chars} characters, the limit is {MAX_LOCK_ID_CHARS}"
        )));
    }
    Ok((lock_id.to_owned(), info))
}

#[tracing::instrument(skip_all, fields(state_id = %state_id, method = %method))]
async fn lock_handler(
    State(app): State<App>,
    Path(state_id): Path<String>,
    method: Method,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let result = async {
        let caller = authenticate(&app, &headers, &state_id).await?;
        content_md5::check(content_md5(&headers), &body)?;
        let (lock_id, info) = parse_lock_info(&body)?;
        match method.as_str() {
            "LOCK" => {
                app.backend_lock(&caller, &lock_id, &info).await?;
                Ok(StatusCode::OK.into_response())
            }
            "UNLOCK" => {
                app.backend_unlock(&caller, &lock_id).await?;
                Ok(StatusCode::OK.into_response())
            }
            _ => Ok((StatusCode::METHOD_NOT_ALLOWED, "use LOCK or UNLOCK").into_response()),
        }
    }
    .await;
    result.unwrap_or_else(error_response)
}
