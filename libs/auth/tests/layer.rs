//! The tower layer in front of a plain service: principal insertion, rejection, allowlist.
#![allow(clippy::unwrap_used)]

mod common;

use std::convert::Infallible;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use cairn_auth::{AuthLayer, Claims, KeySet, Principal, Role, SigningKey, principal};
use common::FIVE_MIN;
use tower::{Layer, ServiceExt};
use uuid::Uuid;

/// Echoes the subject of the principal it finds (or "-") and counts its calls.
fn echo(
    calls: Arc<AtomicUsize>,
) -> impl tower::Service<
    http::Request<String>,
    Response = http::Response<String>,
    Error = Infallible,
    Future = impl Send,
> + Clone {
    tower::service_fn(move |req: http::Request<String>| {
        let calls = Arc::clone(&calls);
        async move {
            calls.fetch_add(1, Ordering::SeqCst);
            let subject = req
                .extensions()
                .get::<Principal>()
                .map_or_else(|| "-".to_owned(), |p| p.subject.clone());
            Ok::<_, Infallible>(http::Response::new(subject))
        }
    })
}

struct Fixture {
    key: SigningKey,
    layer: AuthLayer,
    calls: Arc<AtomicUsize>,
}

fn fixture() -> Fixture {
    let key = SigningKey::generate("k1").unwrap();
    let keys = Arc::new(KeySet::from_signing_keys(std::slice::from_ref(&key)).unwrap());
    let layer = AuthLayer::new(keys)
        .allow_unauthenticated(["/grpc.health.v1.Health/", "/grpc.reflection."]);
    Fixture {
        key,
        layer,
        calls: Arc::new(AtomicUsize::new(0)),
    }
}

fn request(path: &str, authorization: Option<&str>) -> http::Request<String> {
    let mut builder = http::Request::builder()
        .method("POST")
        .uri(format!("http://localhost{path}"))
        .header("content-type", "application/grpc");
    if let Some(value) = authorization {
        builder = builder.header("authorization", value);
    }
    builder.body(String::new()).unwrap()
}

async fn call(f: &Fixture, req: http::Request<String>) -> http::Response<String> {
    f.layer
        .layer(echo(Arc::clone(&f.calls)))
        .oneshot(req)
        .await
        .unwrap()
}

fn assert_unauthenticated(resp: &http::Response<String>) {
    assert_eq!(resp.status(), http::StatusCode::OK);
    assert_eq!(resp.headers()["grpc-status"], "16");
    assert!(resp.headers().contains_key("grpc-message"));
    assert_eq!(resp.headers()["content-type"], "application/grpc");
}

#[tokio::test]
async fn valid_token_reaches_the_service_with_its_principal() {
    let f = fixture();
    let token = f
        .key
        .sign(&Claims::new_user(
            "alice",
            Uuid::new_v4(),
            Role::Operator,
            FIVE_MIN,
        ))
        .unwrap();
    let resp = call(
        &f,
        request(
            "/cairn.state.v1.States/Get",
            Some(&format!("Bearer {token}")),
        ),
    )
    .await;
    assert_eq!(resp.body(), "alice");
    assert!(resp.headers().get("grpc-status").is_none());
    assert_eq!(f.calls.load(Ordering::SeqCst), 1);

    // The scheme is case-insensitive.
    let resp = call(
        &f,
        request(
            "/cairn.state.v1.States/Get",
            Some(&format!("bearer {token}")),
        ),
    )
    .await;
    assert_eq!(resp.body(), "alice");
}

#[tokio::test]
async fn missing_or_bad_tokens_get_grpc_unauthenticated() {
    let f = fixture();
    let expired = {
        let mut c = Claims::new_service("svc", FIVE_MIN);
        c.iat -= 1000;
        c.exp -= 1000;
        f.key.sign(&c).unwrap()
    };
    let stranger = SigningKey::generate("k2")
        .unwrap()
        .sign(&Claims::new_service("svc", FIVE_MIN))
        .unwrap();
    let cases = [
        None,
        Some("Bearer".to_owned()),
        Some("Bearer ".to_owned()),
        Some("Basic dXNlcjpwYXNz".to_owned()),
        Some("Bearer not.a.jwt".to_owned()),
        Some(format!("Bearer {expired}")),
        Some(format!("Bearer {stranger}")),
    ];
    for auth in &cases {
        let resp = call(&f, request("/cairn.state.v1.States/Get", auth.as_deref())).await;
        assert_unauthenticated(&resp);
    }
    assert_eq!(
        f.calls.load(Ordering::SeqCst),
        0,
        "the inner service must not run"
    );
}

#[tokio::test]
async fn allowlisted_paths_pass_without_a_token() {
    let f = fixture();
    let resp = call(&f, request("/grpc.health.v1.Health/Check", None)).await;
    assert_eq!(resp.body(), "-");
    assert!(resp.headers().get("grpc-status").is_none());
    let resp = call(
        &f,
        request(
            "/grpc.reflection.v1.ServerReflection/ServerReflectionInfo",
            None,
        ),
    )
    .await;
    assert_eq!(resp.body(), "-");
    assert_eq!(f.calls.load(Ordering::SeqCst), 2);

    // A prefix match only: a look-alike path is still protected.
    let resp = call(&f, request("/grpc.health.v1.HealthX/Check", None)).await;
    assert_unauthenticated(&resp);
    assert_eq!(f.calls.load(Ordering::SeqCst), 2);
}

#[tokio::test]
async fn without_an_allowlist_everything_needs_a_token() {
    let f = fixture();
    let keys = Arc::new(KeySet::from_signing_keys(std::slice::from_ref(&f.key)).unwrap());
    let resp = AuthLayer::new(keys)
        .layer(echo(Arc::clone(&f.calls)))
        .oneshot(request("/grpc.health.v1.Health/Check", None))
        .await
        .unwrap();
    assert_unauthenticated(&resp);
    assert_eq!(f.calls.load(Ordering::SeqCst), 0);
}

#[test]
fn principal_helper_reads_tonic_request_extensions() {
    let p = Principal {
        subject: "svc".into(),
        tenant_id: None,
        role: Role::Service,
        scopes: vec![],
        token_id: "j".into(),
    };
    let mut http_req = http::Request::new(());
    http_req.extensions_mut().insert(p.clone());
    let req = tonic::Request::from_http(http_req);
    assert_eq!(principal(&req).unwrap(), &p);

    let bare = tonic::Request::new(());
    assert_eq!(
        principal(&bare).unwrap_err().code(),
        tonic::Code::Unauthenticated
    );
}
