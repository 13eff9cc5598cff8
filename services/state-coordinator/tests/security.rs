//! Security of the coordinator: run-token authentication and scoping on the HTTP backend,
//! tenant isolation and roles on gRPC, and a canary proving state content never leaves the
//! encrypted payload (object storage, database, events, logs).
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use cairn_auth::Role;
use cairn_proto::state as pb;
use common::*;
use uuid::Uuid;

/// Captures every tracing event and span field of this test binary in memory, so a test
/// can search what the coordinator logged (it runs in-process).
mod log_capture {
    use std::fmt::Write as _;
    use std::sync::atomic::{AtomicU64, Ordering};
    use std::sync::{Arc, Mutex, OnceLock};

    use tracing::field::{Field, Visit};
    use tracing::level_filters::LevelFilter;
    use tracing::span::{Attributes, Id, Record};
    use tracing::{Event, Level, Metadata, Subscriber};

    type Buffer = Arc<Mutex<String>>;

    static LOGS: OnceLock<Buffer> = OnceLock::new();

    struct Capture {
        buf: Buffer,
        next_id: AtomicU64,
    }

    struct Writer<'a>(&'a mut String);

    impl Visit for Writer<'_> {
        fn record_str(&mut self, field: &Field, value: &str) {
            let _ = write!(self.0, " {}={value}", field.name());
        }
        fn record_debug(&mut self, field: &Field, value: &dyn std::fmt::Debug) {
            let _ = write!(self.0, " {}={value:?}", field.name());
        }
        fn record_error(&mut self, field: &Field, value: &(dyn std::error::Error + 'static)) {
            let _ = write!(self.0, " {}={value} ({value:?})", field.name());
        }
    }

    impl Capture {
        fn write(&self, head: &str, meta: &Metadata<'_>, fields: impl FnOnce(&mut Writer<'_>)) {
            let mut line = format!("{head} {} {}:", meta.level(), meta.target());
            fields(&mut Writer(&mut line));
            line.push('\n');
            self.buf
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push_str(&line);
        }
    }

    impl Subscriber for Capture {
        fn enabled(&self, meta: &Metadata<'_>) -> bool {
            // Everything the services could plausibly log in production (DEBUG and up) and
            // every level of Cairn's own crates.
            *meta.level() <= Level::DEBUG || meta.target().starts_with("cairn")
        }
        fn max_level_hint(&self) -> Option<LevelFilter> {
            Some(LevelFilter::TRACE)
        }
        fn new_span(&self, span: &Attributes<'_>) -> Id {
            self.write("span", span.metadata(), |w| span.record(w));
            Id::from_u64(self.next_id.fetch_add(1, Ordering::Relaxed))
        }
        fn record(&self, _span: &Id, values: &Record<'_>) {
            let mut line = String::from("span-record:");
            values.record(&mut Writer(&mut line));
            line.push('\n');
            self.buf
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .push_str(&line);
        }
        fn record_follows_from(&self, _span: &Id, _follows: &Id) {}
        fn event(&self, event: &Event<'_>) {
            self.write("event", event.metadata(), |w| event.record(w));
        }
        fn enter(&self, _span: &Id) {}
        fn exit(&self, _span: &Id) {}
    }

    /// Installs the capture as the global subscriber (once per binary) and returns the
    /// buffer. Call before `spawn_app`.
    pub fn install() -> Buffer {
        LOGS.get_or_init(|| {
            let buf = Buffer::default();
            tracing::subscriber::set_global_default(Capture {
                buf: buf.clone(),
                next_id: AtomicU64::new(1),
            })
            .expect("no other global subscriber in this test binary");
            buf
        })
        .clone()
    }
}

/// A request the way tofu sends it, with an arbitrary `Authorization` header.
async fn with_auth(
    app: &TestApp,
    method: &str,
    url: &str,
    auth: Option<&str>,
    body: Option<&[u8]>,
) -> Resp {
    let mut req = app
        .http
        .request(reqwest::Method::from_bytes(method.as_bytes()).unwrap(), url);
    if let Some(a) = auth {
        req = req.header("authorization", a);
    }
    if let Some(b) = body {
        req = req
            .header("content-type", "application/json")
            .header("content-md5", md5_b64(b))
            .body(b.to_vec());
    }
    app.raw(req).await
}

fn basic(user: &str, password: &str) -> String {
    format!("Basic {}", STANDARD.encode(format!("{user}:{password}")))
}

/// GET, LOCK, UNLOCK and POST of `a`'s state with `auth`; returns the four statuses.
async fn all_methods(app: &TestApp, a: &Admitted, auth: Option<&str>, lock_id: &str) -> [u16; 4] {
    let info = lock_info(lock_id, "OperationTypeApply");
    let doc = state_doc(99, "lin-x", "x");
    let post_url = format!("{}?ID={lock_id}", a.address);
    [
        with_auth(app, "GET", &a.address, auth, None).await.status,
        with_auth(app, "LOCK", &a.lock_address, auth, Some(info.as_bytes()))
            .await
            .status,
        with_auth(app, "UNLOCK", &a.lock_address, auth, Some(info.as_bytes()))
            .await
            .status,
        with_auth(app, "POST", &post_url, auth, Some(&doc))
            .await
            .status,
    ]
}

/// The same addresses, pointed at another state id.
fn retarget(a: &Admitted, state_id: &str) -> Admitted {
    let base = a.address.rsplit_once('/').unwrap().0;
    let address = format!("{base}/{state_id}");
    Admitted {
        state_id: state_id.to_owned(),
        lock_address: format!("{address}/lock"),
        address,
        ..a.clone()
    }
}

async fn lock_row(app: &TestApp, state_id: &str) -> Option<String> {
    sqlx::query_scalar("SELECT lock_id FROM locks WHERE state_id = $1::uuid")
        .bind(state_id)
        .fetch_optional(&app.admin_pool().await)
        .await
        .unwrap()
}

/// Polls `probe` until it returns `Some` or the deadline passes.
async fn eventually<T, F, Fut>(what: &str, deadline: Duration, mut probe: F) -> T
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Option<T>>,
{
    let start = Instant::now();
    loop {
        if let Some(done) = probe().await {
            return done;
        }
        assert!(start.elapsed() < deadline, "timed out waiting for {what}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

// ---------------------------------------------------------------- HTTP backend

#[tokio::test]
async fn bad_or_missing_basic_auth_is_401() {
    log_capture::install();
    let app = spawn_app().await;
    let state_id = app.create_state("auth-401").await;
    let doc = state_doc(1, "lin-auth", "v");
    app.apply_doc(&state_id, &doc).await;
    let a = app.start_run(&state_id, pb::RunKind::Apply).await;

    let variants = [
        ("no Authorization", None),
        ("wrong user name", Some(basic("admin", &a.token))),
        ("empty password", Some(basic("run", ""))),
        ("unknown token", Some(basic("run", "not-a-run-token"))),
        (
            "token with a flipped char",
            Some(basic("run", &flip_last(&a.token))),
        ),
        ("bearer scheme", Some(format!("Bearer {}", a.token))),
        ("not base64", Some("Basic %%%not-base64%%%".to_owned())),
        (
            "no colon",
            Some(format!("Basic {}", STANDARD.encode(&a.token))),
        ),
        (
            "JWT instead of run token",
            Some(basic("run", &app.service_token())),
        ),
        (
            "user token",
            Some(basic("run", &app.user_token(Role::Owner))),
        ),
    ];
    for (what, auth) in &variants {
        let got = all_methods(&app, &a, auth.as_deref(), "lock-401").await;
        assert_eq!(got, [401; 4], "{what}");
    }
    let r = app.raw(app.http.get(&a.address)).await;
    assert_eq!(r.status, 401);
    let challenge = app
        .http
        .get(&a.address)
        .send()
        .await
        .unwrap()
        .headers()
        .get("www-authenticate")
        .map(|v| v.to_str().unwrap().to_owned());
    assert!(
        challenge.is_some_and(|c| c.starts_with("Basic")),
        "401 carries a Basic challenge"
    );
    // The real token still works; nothing changed.
    assert_eq!(app.get(&a).await.body, doc);
    assert_eq!(app.lock(&a, "real").await.status, 200);
    assert_eq!(lock_row(&app, &state_id).await.as_deref(), Some("real"));
    assert_eq!(app.state_info(&state_id).await.current_generation, 1);
}

fn flip_last(token: &str) -> String {
    let mut t = token.to_owned();
    let last = t.pop().unwrap();
    t.push(if last == 'A' { 'B' } else { 'A' });
    t
}

#[tokio::test]
async fn a_run_token_on_another_states_url_is_403_never_404() {
    log_capture::install();
    let app = spawn_app().await;
    let mine = app.create_state("mine").await;
    let empty = app.create_state("other-empty").await;
    let full = app.create_state("other-full").await;
    let full_doc = state_doc(1, "lin-full", "theirs");
    app.apply_doc(&full, &full_doc).await;
    // A state of another tenant, created by the service.
    let foreign = app
        .states(&app.service_token())
        .create_state(pb::CreateStateRequest {
            tenant_id: Uuid::new_v4().to_string(),
            instance_id: Uuid::new_v4().to_string(),
            physical_name: "foreign".to_owned(),
        })
        .await
        .unwrap()
        .into_inner()
        .state
        .unwrap()
        .state_id;

    let a = app.start_run(&mine, pb::RunKind::Apply).await;
    let auth = basic("run", &a.token);
    // On its own state the token works (the state is empty: 404).
    assert_eq!(app.get(&a).await.status, 404);
    let targets = [
        ("another state without a generation", empty.clone()),
        ("another state with a generation", full.clone()),
        ("another tenant's state", foreign.clone()),
        ("a state that does not exist", Uuid::new_v4().to_string()),
        ("a malformed state id", "not-a-uuid".to_owned()),
    ];
    for (what, target) in &targets {
        let other = retarget(&a, target);
        let got = all_methods(&app, &other, Some(&auth), "lock-403").await;
        assert_eq!(got, [403; 4], "{what}");
    }
    for s in [&empty, &full, &foreign] {
        assert_eq!(lock_row(&app, s).await, None, "no lock was taken on {s}");
    }
    assert_eq!(app.state_info(&empty).await.current_generation, 0);
    assert_eq!(app.state_info(&full).await.current_generation, 1);
    let reader = app.start_run(&full, pb::RunKind::Plan).await;
    assert_eq!(app.get(&reader).await.body, full_doc);
}

#[tokio::test]
async fn read_only_tokens_read_but_cannot_lock_or_write() {
    log_capture::install();
    let app = spawn_app().await;
    let state_id = app.create_state("read-only").await;
    let doc = state_doc(1, "lin-ro", "v");
    app.apply_doc(&state_id, &doc).await;

    for kind in [pb::RunKind::Preview, pb::RunKind::Drift] {
        let ro = app.start_run(&state_id, kind).await;
        assert!(ro.read_only, "{kind:?}");
        let got = app.get(&ro).await;
        assert_eq!(got.status, 200, "{kind:?}");
        assert_eq!(got.body, doc, "{kind:?}");
        let id = Uuid::new_v4().to_string();
        assert_eq!(app.lock(&ro, &id).await.status, 403, "{kind:?} LOCK");
        assert_eq!(lock_row(&app, &state_id).await, None, "{kind:?}");
        assert_eq!(app.unlock(&ro, &id).await.status, 403, "{kind:?} UNLOCK");
        let next = state_doc(2, "lin-ro", "w");
        assert_eq!(app.post(&ro, &id, &next).await.status, 403, "{kind:?} POST");

        // Not even with the id of a lock a writer holds.
        let w = app.start_run(&state_id, pb::RunKind::Apply).await;
        let wid = Uuid::new_v4().to_string();
        assert_eq!(app.lock(&w, &wid).await.status, 200);
        assert_eq!(
            app.post(&ro, &wid, &next).await.status,
            403,
            "{kind:?} POST"
        );
        assert_eq!(app.unlock(&ro, &wid).await.status, 403, "{kind:?} UNLOCK");
        assert_eq!(lock_row(&app, &state_id).await, Some(wid.clone()));
        assert_eq!(app.unlock(&w, &wid).await.status, 200);
        app.finish(&w, pb::RunOutcome::Succeeded).await;
        assert_eq!(app.state_info(&state_id).await.current_generation, 1);
    }
}

#[tokio::test]
async fn an_expired_attempts_token_is_401_and_its_lock_is_freed() {
    log_capture::install();
    let app = spawn_app_with(Options {
        lease: Duration::from_secs(2),
        ..Options::default()
    })
    .await;
    let state_id = app.create_state("expired").await;
    let a = app.start_run(&state_id, pb::RunKind::Apply).await;
    let id = Uuid::new_v4().to_string();
    assert_eq!(app.lock(&a, &id).await.status, 200);

    // Until the lease runs out the token reads (404: no generation yet); then 401.
    let (app_ref, a_ref) = (&app, &a);
    let status = eventually(
        "the lease to expire",
        Duration::from_secs(30),
        || async move {
            let status = app_ref.get(a_ref).await.status;
            (status != 404).then_some(status)
        },
    )
    .await;
    assert_eq!(status, 401);
    let got = all_methods(&app, &a, Some(&basic("run", &a.token)), &id).await;
    assert_eq!(got, [401; 4]);
    assert_eq!(app.state_info(&state_id).await.current_generation, 0);

    // The dead attempt's lock does not block a new run.
    let b = app.start_run(&state_id, pb::RunKind::Apply).await;
    let bid = Uuid::new_v4().to_string();
    let r = app.lock(&b, &bid).await;
    assert_eq!(r.status, 200, "{}", r.text());
}

#[tokio::test]
async fn admitting_attempt_two_frees_attempt_ones_lock_and_refuses_its_token() {
    log_capture::install();
    let app = spawn_app_with(Options {
        lease: Duration::from_secs(2),
        ..Options::default()
    })
    .await;
    let state_id = app.create_state("attempts").await;
    app.apply_doc(&state_id, &state_doc(1, "lin-att", "v"))
        .await;
    let run = app.register(&state_id, pb::RunKind::Apply, "dev").await;
    let one = app.admit(&run).await.unwrap();
    assert_eq!(one.attempt, 1);
    let id1 = Uuid::new_v4().to_string();
    assert_eq!(app.lock(&one, &id1).await.status, 200);
    assert_eq!(app.get(&one).await.status, 200);

    // While attempt 1's lease is live, no attempt 2.
    let early = app.admit(&run).await.unwrap_err();
    assert_eq!(early.code(), tonic::Code::Aborted, "{early:?}");

    let (app_ref, run_ref) = (&app, &run);
    let two = eventually(
        "attempt 2 to be admitted",
        Duration::from_secs(30),
        || async move {
            match app_ref.admit(run_ref).await {
                Ok(a) => Some(a),
                Err(s) if s.code() == tonic::Code::Aborted => None,
                Err(s) => panic!("admit attempt 2: {s:?}"),
            }
        },
    )
    .await;
    assert_eq!(two.attempt, 2);
    assert!(!two.interrupted, "a dev apply runs again");
    assert_eq!(
        lock_row(&app, &state_id).await,
        None,
        "admission freed the lock"
    );

    let id2 = Uuid::new_v4().to_string();
    let r = app.lock(&two, &id2).await;
    assert_eq!(r.status, 200, "{}", r.text());
    let got = all_methods(&app, &one, Some(&basic("run", &one.token)), &id1).await;
    assert_eq!(got, [401; 4], "attempt 1's token is refused");
    assert_eq!(lock_row(&app, &state_id).await, Some(id2));
    assert_eq!(app.state_info(&state_id).await.current_generation, 1);
}

#[tokio::test]
async fn a_finished_attempts_token_is_refused() {
    log_capture::install();
    let app = spawn_app().await;
    let state_id = app.create_state("finished").await;
    let done = app
        .apply_doc(&state_id, &state_doc(1, "lin-fin", "v"))
        .await;
    let got = all_methods(&app, &done, Some(&basic("run", &done.token)), "again").await;
    assert_eq!(got, [401; 4]);

    let preview = app.start_run(&state_id, pb::RunKind::Preview).await;
    assert_eq!(app.get(&preview).await.status, 200);
    app.finish(&preview, pb::RunOutcome::Succeeded).await;
    assert_eq!(app.get(&preview).await.status, 401);

    let failed = app.start_run(&state_id, pb::RunKind::Apply).await;
    assert_eq!(app.lock(&failed, "f").await.status, 200);
    app.finish(&failed, pb::RunOutcome::Failed).await;
    assert_eq!(app.get(&failed).await.status, 401);
    assert_eq!(
        lock_row(&app, &state_id).await,
        None,
        "finish freed the lock"
    );
}

// ---------------------------------------------------------------- gRPC

fn code<T: std::fmt::Debug>(r: Result<tonic::Response<T>, tonic::Status>) -> tonic::Code {
    match r {
        Ok(ok) => panic!("expected an error, got {ok:?}"),
        Err(s) => s.code(),
    }
}

#[tokio::test]
async fn another_tenants_user_gets_not_found_for_everything() {
    log_capture::install();
    let app = spawn_app().await;
    let state_id = app.create_state("tenant-a").await;
    app.apply_doc(&state_id, &state_doc(1, "lin-t", "v")).await;
    let holder = app.start_run(&state_id, pb::RunKind::Apply).await;
    assert_eq!(app.lock(&holder, "held").await.status, 200);

    let stranger_tenant = Uuid::new_v4();
    for role in [Role::Viewer, Role::Admin, Role::Owner] {
        let t = app.keys.user_token(stranger_tenant, role);
        for target in [state_id.clone(), Uuid::new_v4().to_string()] {
            let what = format!("{role:?} on {target}");
            let c = code(
                app.states(&t)
                    .get_state(pb::GetStateRequest {
                        state_id: target.clone(),
                    })
                    .await,
            );
            assert_eq!(c, tonic::Code::NotFound, "GetState {what}");
            let c = code(
                app.runs(&t)
                    .get_outputs(pb::GetOutputsRequest {
                        state_id: target.clone(),
                    })
                    .await,
            );
            assert_eq!(c, tonic::Code::NotFound, "GetOutputs {what}");
            let c = code(
                app.recovery(&t)
                    .inspect_state(pb::InspectStateRequest {
                        state_id: target.clone(),
                    })
                    .await,
            );
            assert_eq!(c, tonic::Code::NotFound, "InspectState {what}");
            let c = code(
                app.recovery(&t)
                    .recover(pb::RecoverRequest {
                        state_id: target.clone(),
                        rollback_to_generation: 0,
                        reason: "let me in".to_owned(),
                    })
                    .await,
            );
            assert_eq!(c, tonic::Code::NotFound, "Recover {what}");
            let c = code(
                app.recovery(&t)
                    .force_unlock(pb::ForceUnlockRequest {
                        state_id: target.clone(),
                        lock_id: "held".to_owned(),
                        reason: "let me in".to_owned(),
                    })
                    .await,
            );
            assert_eq!(c, tonic::Code::NotFound, "ForceUnlock {what}");
        }
        let c = code(
            app.states(&t)
                .list_states(pb::ListStatesRequest {
                    tenant_id: app.tenant.to_string(),
                    ..Default::default()
                })
                .await,
        );
        assert_eq!(c, tonic::Code::NotFound, "ListStates {role:?}");
    }
    assert_eq!(lock_row(&app, &state_id).await.as_deref(), Some("held"));

    // The tenant's own admin sees it (the calls above could succeed).
    let own = app
        .recovery(&app.user_token(Role::Admin))
        .inspect_state(pb::InspectStateRequest {
            state_id: state_id.clone(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(own.generations.len(), 1);
}

#[tokio::test]
async fn a_viewer_cannot_create_a_state() {
    log_capture::install();
    let app = spawn_app().await;
    let req = |name: &str| pb::CreateStateRequest {
        tenant_id: app.tenant.to_string(),
        instance_id: app.instance.to_string(),
        physical_name: name.to_owned(),
    };
    let c = code(
        app.states(&app.user_token(Role::Viewer))
            .create_state(req("by-viewer"))
            .await,
    );
    assert_eq!(c, tonic::Code::PermissionDenied);
    let stranger = app.keys.user_token(Uuid::new_v4(), Role::Owner);
    let c = code(app.states(&stranger).create_state(req("by-stranger")).await);
    assert_eq!(c, tonic::Code::NotFound, "another tenant's owner");
    let listed = app
        .states(&app.user_token(Role::Viewer))
        .list_states(pb::ListStatesRequest {
            tenant_id: app.tenant.to_string(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(listed.states.is_empty(), "nothing was created");

    let made = app
        .states(&app.user_token(Role::Operator))
        .create_state(req("by-operator"))
        .await
        .expect("an operator creates states")
        .into_inner();
    assert!(made.created);
}

#[tokio::test]
async fn user_tokens_cannot_call_service_only_run_rpcs() {
    log_capture::install();
    let app = spawn_app().await;
    let state_id = app.create_state("svc-only").await;
    let registered = app.register(&state_id, pb::RunKind::Apply, "dev").await;
    for role in [
        Role::Viewer,
        Role::Operator,
        Role::Approver,
        Role::Admin,
        Role::Owner,
    ] {
        let t = app.user_token(role);
        let c = code(
            app.runs(&t)
                .register_run(app.registration(&state_id, pb::RunKind::Apply, "dev"))
                .await,
        );
        assert_eq!(c, tonic::Code::PermissionDenied, "RegisterRun as {role:?}");
        let c = code(
            app.runs(&t)
                .admit_run(pb::AdmitRunRequest {
                    run_id: registered.clone(),
                })
                .await,
        );
        assert_eq!(c, tonic::Code::PermissionDenied, "AdmitRun as {role:?}");
        let c = code(
            app.runs(&t)
                .finish_run(pb::FinishRunRequest {
                    run_id: registered.clone(),
                    attempt: 1,
                    outcome: pb::RunOutcome::Failed as i32,
                    message: String::new(),
                })
                .await,
        );
        assert_eq!(c, tonic::Code::PermissionDenied, "FinishRun as {role:?}");
        let c = code(
            app.runs(&t)
                .get_run_config(pb::GetRunConfigRequest {
                    run_id: registered.clone(),
                    attempt: 1,
                })
                .await,
        );
        assert_eq!(c, tonic::Code::PermissionDenied, "GetRunConfig as {role:?}");
        let c = code(
            app.runs(&t)
                .get_registered_run_config(pb::GetRegisteredRunConfigRequest {
                    run_id: registered.clone(),
                })
                .await,
        );
        assert_eq!(
            c,
            tonic::Code::PermissionDenied,
            "GetRegisteredRunConfig as {role:?}"
        );
        let c = code(
            app.runs(&t)
                .get_masked_plan(pb::GetMaskedPlanRequest {
                    run_id: registered.clone(),
                })
                .await,
        );
        assert_eq!(
            c,
            tonic::Code::PermissionDenied,
            "GetMaskedPlan as {role:?}"
        );
    }
    // Nothing was admitted by those calls: the service admits attempt 1.
    let a = app.admit(&registered).await.unwrap();
    assert_eq!(a.attempt, 1);
}

#[tokio::test]
async fn calls_without_a_valid_token_are_unauthenticated_but_health_is_open() {
    log_capture::install();
    let app = spawn_app().await;
    let state_id = app.create_state("no-token").await;

    let bare_states = StatesClient::new(app.grpc.clone());
    let c = code(
        bare_states
            .clone()
            .get_state(pb::GetStateRequest {
                state_id: state_id.clone(),
            })
            .await,
    );
    assert_eq!(c, tonic::Code::Unauthenticated, "GetState without token");
    let c = code(
        RunsClient::new(app.grpc.clone())
            .admit_run(pb::AdmitRunRequest {
                run_id: Uuid::new_v4().to_string(),
            })
            .await,
    );
    assert_eq!(c, tonic::Code::Unauthenticated, "AdmitRun without token");
    let c = code(
        RecoveryClient::new(app.grpc.clone())
            .inspect_state(pb::InspectStateRequest {
                state_id: state_id.clone(),
            })
            .await,
    );
    assert_eq!(
        c,
        tonic::Code::Unauthenticated,
        "InspectState without token"
    );

    let bad = [
        ("expired", app.keys.expired_token(app.tenant, Role::Owner)),
        ("expired service", app.keys.expired_service_token()),
        ("forged", app.keys.forged_token(app.tenant, Role::Owner)),
        (
            "unknown key",
            app.keys.unknown_key_token(app.tenant, Role::Owner),
        ),
        ("garbage", "not.a.jwt".to_owned()),
    ];
    for (what, t) in &bad {
        let c = code(
            app.states(t)
                .get_state(pb::GetStateRequest {
                    state_id: state_id.clone(),
                })
                .await,
        );
        assert_eq!(c, tonic::Code::Unauthenticated, "{what}");
        let c = code(
            app.runs(t)
                .register_run(app.registration(&state_id, pb::RunKind::Plan, "dev"))
                .await,
        );
        assert_eq!(c, tonic::Code::Unauthenticated, "{what}");
    }

    let mut health = tonic_health::pb::health_client::HealthClient::new(app.grpc.clone());
    for service in [
        "",
        "cairn.state.v1.States",
        "cairn.state.v1.Runs",
        "cairn.state.v1.Recovery",
    ] {
        let status = health
            .check(tonic_health::pb::HealthCheckRequest {
                service: service.to_owned(),
            })
            .await
            .unwrap_or_else(|e| panic!("health of {service:?}: {e}"))
            .into_inner()
            .status;
        assert_eq!(
            status,
            tonic_health::pb::health_check_response::ServingStatus::Serving as i32,
            "{service:?}"
        );
    }
}

// ---------------------------------------------------------------- canary

/// Every encoding under which a secret could plausibly be stored or logged.
fn encodings(secret: &str) -> Vec<Vec<u8>> {
    let raw = secret.as_bytes();
    let mut out = vec![
        raw.to_vec(),
        hex::encode(raw).into_bytes(),
        hex::encode_upper(raw).into_bytes(),
    ];
    // base64 of the secret at each of the three alignments inside a larger buffer: the
    // characters of the 3-byte groups that lie wholly within the secret.
    for pad in 0..3 {
        let mut buf = vec![b' '; pad];
        buf.extend_from_slice(raw);
        let enc = STANDARD.encode(&buf);
        let first_group = pad.div_ceil(3);
        let end_group = buf.len() / 3;
        out.push(enc.as_bytes()[4 * first_group..4 * end_group].to_vec());
    }
    out
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// Panics if any encoding of any canary occurs in `bytes`.
fn assert_clean(canaries: &[&str], bytes: &[u8], place: &str) {
    for c in canaries {
        for enc in encodings(c) {
            assert!(
                !contains(bytes, &enc),
                "canary {c} found (as {:?}) in {place}",
                String::from_utf8_lossy(&enc)
            );
        }
    }
}

fn canary_doc(serial: u64, lineage: &str, public: &str, secret: &str) -> Vec<u8> {
    let mut v = serde_json::to_vec(&serde_json::json!({
        "version": 4, "terraform_version": "1.12.6", "serial": serial, "lineage": lineage,
        "outputs": {
            "endpoint": {"value": public, "type": "string"},
            "password": {"value": secret, "type": "string", "sensitive": true},
            "nested": {"value": {"token": secret}, "type": ["object", {"token": "string"}], "sensitive": true}
        },
        "resources": [{
            "mode": "managed", "type": "random_password", "name": "db",
            "provider": "provider[\"registry.opentofu.org/hashicorp/random\"]",
            "instances": [{
                "schema_version": 3,
                "attributes": {"id": "none", "result": secret, "note": public},
                "sensitive_attributes": [[{"type": "get_attr", "value": "result"}]]
            }]
        }],
        "check_results": null
    }))
    .unwrap();
    v.push(b'\n');
    v
}

#[test]
fn the_canary_search_finds_every_encoding() {
    let canary = "canarysec0123456789abcdef";
    let mut places: Vec<Vec<u8>> = vec![
        format!("x{canary}y").into_bytes(),
        format!("\\x00{}ff", hex::encode(canary)).into_bytes(),
        hex::encode_upper(format!("--{canary}--")).into_bytes(),
    ];
    for prefix in ["", "a", "ab", "abc", "abcd"] {
        places.push(
            STANDARD
                .encode(format!("{prefix}{canary}tail"))
                .into_bytes(),
        );
        places.push(STANDARD.encode(format!("{prefix}{canary}")).into_bytes());
    }
    for place in &places {
        let found = std::panic::catch_unwind(|| assert_clean(&[canary], place, "sample"));
        assert!(
            found.is_err(),
            "not found in {}",
            String::from_utf8_lossy(place)
        );
    }
    assert_clean(&[canary], b"canarysec0123456789abcdeX", "a near miss");
}

#[tokio::test]
async fn canary_state_content_never_leaves_the_encrypted_payload() {
    let logs = log_capture::install();
    let app = spawn_app().await;
    let public = format!("canarypub{}", Uuid::new_v4().simple());
    let secret = format!("canarysec{}", Uuid::new_v4().simple());
    let canaries = [public.as_str(), secret.as_str()];
    let lineage = Uuid::new_v4().to_string();
    let state_id = app.create_state("canary").await;

    // An apply with an intermediate and a final write.
    let a = app.start_run(&state_id, pb::RunKind::Apply).await;
    let id = Uuid::new_v4().to_string();
    assert_eq!(app.lock(&a, &id).await.status, 200);
    assert_eq!(app.get(&a).await.status, 404);
    let one = canary_doc(1, &lineage, &public, &secret);
    let two = canary_doc(2, &lineage, &public, &secret);
    assert_eq!(app.post(&a, &id, &one).await.status, 200);
    assert_eq!(app.post(&a, &id, &two).await.status, 200);
    // Refused writes carrying the canary (serial reuse, lineage mismatch, bad field).
    assert_eq!(
        app.post(&a, &id, &canary_doc(2, &lineage, &secret, &public))
            .await
            .status,
        409
    );
    assert_eq!(
        app.post(&a, &id, &canary_doc(3, "other-lineage", &public, &secret))
            .await
            .status,
        409
    );
    let bad_field = format!("{{\"version\":4,\"serial\":\"{secret}\",\"lineage\":\"{lineage}\"}}");
    assert_eq!(app.post(&a, &id, bad_field.as_bytes()).await.status, 400);
    assert_eq!(app.unlock(&a, &id).await.status, 200);
    app.finish(&a, pb::RunOutcome::Succeeded).await;

    // A failed apply hands in its errored.tfstate; a plan stores its saved plan.
    let failed = app.start_run(&state_id, pb::RunKind::Apply).await;
    app.runs(&app.service_token())
        .quarantine(pb::QuarantineRequest {
            run_id: failed.run_id.clone(),
            attempt: failed.attempt,
            state: canary_doc(3, &lineage, &public, &secret),
        })
        .await
        .expect("quarantine");
    app.finish(&failed, pb::RunOutcome::Failed).await;
    let plan = app.start_run(&state_id, pb::RunKind::Plan).await;
    let config = app
        .runs(&app.service_token())
        .get_run_config(pb::GetRunConfigRequest {
            run_id: plan.run_id.clone(),
            attempt: plan.attempt,
        })
        .await
        .unwrap()
        .into_inner();
    let mut plan_bytes = b"PK\x03\x04 tfplan ".to_vec();
    plan_bytes.extend_from_slice(&two);
    app.runs(&app.service_token())
        .put_plan(pb::PutPlanRequest {
            run_id: plan.run_id.clone(),
            attempt: plan.attempt,
            plan: plan_bytes,
            tags: Some(pb::PlanTags {
                config_hash: config.config_hash,
                base_generation: plan.base_generation,
                tofu_version: "1.12.6".to_owned(),
                provider_lock_hash: "0".repeat(64),
                module_library_hash: "0".repeat(64),
            }),
            provider_lock_file: b"# provider locks\n".to_vec(),
            // The masked plan JSON carries both canaries here (a masking bug upstream must
            // still not put them in clear anywhere of ours).
            masked_plan_json: format!(
                r#"{{"format_version":"1.2","resource_changes":[{{"change":{{"after":{{"endpoint":"{public}","password":"{secret}"}}}}}}]}}"#
            )
            .into_bytes(),
        })
        .await
        .expect("put plan");

    // Sanity: the canaries really are stored (a later run reads them back).
    let got = app.get(&plan).await;
    assert_eq!(got.status, 200);
    assert_eq!(got.body, two);
    app.finish(&plan, pb::RunOutcome::Succeeded).await;

    // GetOutputs gives the public value and withholds every sensitive one.
    for token in [app.service_token(), app.user_token(Role::Viewer)] {
        let outputs = app
            .runs(&token)
            .get_outputs(pb::GetOutputsRequest {
                state_id: state_id.clone(),
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(outputs.generation, 2);
        let dump = format!("{outputs:?}");
        assert!(dump.contains(&public), "{dump}");
        assert_clean(&[&secret], dump.as_bytes(), "GetOutputs");
        for o in &outputs.outputs {
            assert_eq!(o.sensitive, o.name != "endpoint", "{o:?}");
            if o.sensitive {
                assert!(o.value_json.is_empty(), "{o:?}");
            }
        }
    }

    // Events: wait until the relay published the run's events, then search them all.
    let stream_name = cairn_bus::Namespace::with_prefix(&app.nats.prefix)
        .unwrap()
        .events_stream();
    let (app_ref, stream_ref, state_ref) = (&app, &stream_name, &state_id);
    let messages = eventually(
        "the events on NATS",
        Duration::from_secs(30),
        || async move {
            let messages = read_all_events(app_ref, stream_ref).await;
            let events: Vec<cairn_proto::events::Event> = messages
                .iter()
                .map(|(payload, _)| prost::Message::decode(payload.as_slice()).expect("an Event"))
                .collect();
            let committed = events
                .iter()
                .filter(|e| e.event_type == "generation_committed" && e.aggregate_id == *state_ref)
                .count();
            let finished = events
                .iter()
                .filter(|e| e.event_type == "run_finished")
                .count();
            (committed == 2 && finished == 3).then_some(messages)
        },
    )
    .await;
    for (i, (_, everything)) in messages.iter().enumerate() {
        assert_clean(
            &canaries,
            everything,
            &format!("event #{i} on {stream_name}"),
        );
    }

    // Object storage: every version of every object.
    let objects = all_object_versions(&app).await;
    assert!(
        objects.len() >= 5,
        "two generations, a quarantined state, a plan and its masked JSON at least: {}",
        objects.len()
    );
    for (key, bytes) in &objects {
        assert_clean(&canaries, bytes, &format!("object {key}"));
    }

    // The database: every row of every table, bytea as hex.
    let rows = all_rows(&app).await;
    for table in [
        "state.generations",
        "state.quarantine",
        "state.plans",
        "state.masked_plans",
        "state.outbox",
    ] {
        assert!(
            rows.iter().any(|(t, _)| t == table),
            "the dump has rows of {table}"
        );
    }
    for (table, row) in &rows {
        assert_clean(&canaries, row.as_bytes(), &format!("table {table}: {row}"));
    }

    // The logs of the whole binary (the coordinator runs in-process).
    let text = logs.lock().unwrap_or_else(|p| p.into_inner()).clone();
    assert!(
        text.contains(&state_id),
        "the capture saw the coordinator's logs about this state"
    );
    assert_clean(&canaries, text.as_bytes(), "the logs");
}

/// Every message on the stream, read with an ephemeral pull consumer from the start:
/// `(payload, subject + headers + payload)`.
async fn read_all_events(app: &TestApp, stream_name: &str) -> Vec<(Vec<u8>, Vec<u8>)> {
    use async_nats::jetstream::consumer::{AckPolicy, DeliverPolicy, pull};
    use futures::StreamExt;
    let mut stream = app
        .nats
        .jetstream
        .get_stream(stream_name)
        .await
        .expect("events stream");
    let total = stream.info().await.expect("stream info").state.messages;
    let consumer = stream
        .create_consumer(pull::Config {
            deliver_policy: DeliverPolicy::All,
            ack_policy: AckPolicy::None,
            ..Default::default()
        })
        .await
        .expect("consumer");
    let mut out = Vec::new();
    while (out.len() as u64) < total {
        let mut batch = consumer
            .fetch()
            .max_messages(100)
            .expires(Duration::from_secs(1))
            .messages()
            .await
            .expect("fetch");
        let before = out.len();
        while let Some(msg) = batch.next().await {
            let msg = msg.expect("message");
            let mut bytes = msg.subject.as_bytes().to_vec();
            bytes.push(b'\n');
            if let Some(h) = &msg.headers {
                bytes.extend_from_slice(format!("{h:?}\n").as_bytes());
            }
            bytes.extend_from_slice(&msg.payload);
            out.push((msg.payload.to_vec(), bytes));
        }
        assert!(
            out.len() > before,
            "the consumer stalled at {before} of {total}"
        );
    }
    out
}

async fn all_object_versions(app: &TestApp) -> Vec<(String, Vec<u8>)> {
    let s3 = &app.aws.s3;
    let mut out = Vec::new();
    let mut key_marker: Option<String> = None;
    let mut version_marker: Option<String> = None;
    loop {
        let page = s3
            .list_object_versions()
            .bucket(&app.aws.bucket)
            .set_key_marker(key_marker.clone())
            .set_version_id_marker(version_marker.clone())
            .send()
            .await
            .expect("list object versions");
        for v in page.versions() {
            let key = v.key().unwrap().to_owned();
            let obj = s3
                .get_object()
                .bucket(&app.aws.bucket)
                .key(&key)
                .set_version_id(v.version_id().map(str::to_owned))
                .send()
                .await
                .expect("get object version");
            let mut bytes = format!("{:?}\n", obj.metadata()).into_bytes();
            bytes.extend_from_slice(&obj.body.collect().await.unwrap().into_bytes());
            out.push((key, bytes));
        }
        if page.is_truncated() != Some(true) {
            return out;
        }
        key_marker = page.next_key_marker().map(str::to_owned);
        version_marker = page.next_version_id_marker().map(str::to_owned);
    }
}

/// `(schema.table, row as JSON)` for every row of every table outside the system schemas.
async fn all_rows(app: &TestApp) -> Vec<(String, String)> {
    let pool = app.admin_pool().await;
    let tables: Vec<(String, String)> = sqlx::query_as(
        "SELECT table_schema::text, table_name::text FROM information_schema.tables
         WHERE table_type = 'BASE TABLE'
           AND table_schema NOT IN ('pg_catalog', 'information_schema')",
    )
    .fetch_all(&pool)
    .await
    .unwrap();
    assert!(
        tables.iter().any(|(s, _)| s == "state"),
        "tables of schema state: {tables:?}"
    );
    let mut out = Vec::new();
    for (schema, table) in tables {
        let rows: Vec<String> = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
            "SELECT row_to_json(t)::text FROM \"{schema}\".\"{table}\" t"
        )))
        .fetch_all(&pool)
        .await
        .unwrap();
        for row in rows {
            out.push((format!("{schema}.{table}"), row));
        }
    }
    out
}
