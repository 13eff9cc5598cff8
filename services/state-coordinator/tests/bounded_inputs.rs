//! What the HTTP backend refuses with 400 says what is wrong without echoing what the
//! request carried (serde's messages quote values), and a LockInfo is bounded.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use cairn_proto::state as pb;
use common::*;
use uuid::Uuid;

fn canary() -> String {
    format!("hdr-canary-{}", Uuid::new_v4().simple())
}

/// Sends `body` with `method` to `url` as tofu would, plus the canary in headers of its own.
async fn send_with_canary(
    app: &TestApp,
    method: &str,
    url: &str,
    token: &str,
    body: &[u8],
    canary: &str,
) -> Resp {
    app.raw(
        app.http
            .request(reqwest::Method::from_bytes(method.as_bytes()).unwrap(), url)
            .basic_auth("run", Some(token))
            .header("content-type", "application/json")
            .header("content-md5", md5_b64(body))
            .header("user-agent", format!("OpenTofu/1.12.6 {canary}"))
            .header("x-request-note", canary)
            .body(body.to_vec()),
    )
    .await
}

#[tokio::test]
async fn a_400_never_echoes_what_the_request_carried() {
    let app = spawn_app().await;
    let state_id = app.create_state("no-echo").await;
    app.apply_doc(&state_id, &state_doc(1, "lin-echo", "v1"))
        .await;
    let a = app.start_run(&state_id, pb::RunKind::Apply).await;
    let id = Uuid::new_v4().to_string();
    assert_eq!(app.lock(&a, &id).await.status, 200);
    let c = canary();
    let post_url = format!("{}?ID={id}", a.address);
    let posts = [
        format!(r#"{{"version":4,"serial":"{c}","lineage":"lin-echo"}}"#),
        format!(r#"{{"version":4,"serial":2,"lineage":{{"{c}":1}}}}"#),
        format!(r#"{{"version":4,"serial":2,"lineage":["{c}"]}}"#),
        format!(r#"{{"version":"{c}","serial":2,"lineage":"lin-echo"}}"#),
        format!(r#"{{"version":4,"serial":2,"lineage":"lin-echo","outputs":"{c}"}}"#),
        format!(
            r#"{{"serial":2,"lineage":"lin-echo","encryption_version":"{c}","meta":{{}},"encrypted_data":"x"}}"#
        ),
        format!(r#"{{"version":4,"serial":2,"lineage":"{c}"#),
    ];
    for body in &posts {
        let r = send_with_canary(&app, "POST", &post_url, &a.token, body.as_bytes(), &c).await;
        assert!(
            (400..500).contains(&r.status),
            "{body}: {} {}",
            r.status,
            r.text()
        );
        assert!(
            !r.text().contains(&c),
            "{body}: the 400 echoes {:?}",
            r.text()
        );
    }
    let locks = [
        format!(r#"{{"ID":{{"{c}":1}},"Operation":"OperationTypeApply"}}"#),
        format!(r#"{{"ID":"x","Who":"{c}""#),
        format!(r#"["{c}"]"#),
        format!(r#"{{"ID":"{c}{}"}}"#, "x".repeat(300)),
    ];
    for body in &locks {
        for method in ["LOCK", "UNLOCK"] {
            let r = send_with_canary(&app, method, &a.lock_address, &a.token, body.as_bytes(), &c)
                .await;
            assert_eq!(r.status, 400, "{method} {body}: {}", r.text());
            assert!(
                !r.text().contains(&c),
                "{method} {body}: the 400 echoes {:?}",
                r.text()
            );
        }
    }
    // A query string axum cannot read (invalid percent-encoding) carries the canary too.
    let bad_query = format!("{}?ID=%ZZ{c}", a.address);
    let r = send_with_canary(&app, "POST", &bad_query, &a.token, b"{}", &c).await;
    assert!(!r.text().contains(&c), "query: {} {:?}", r.status, r.text());
    assert_eq!(app.state_info(&state_id).await.current_generation, 1);
}

#[tokio::test]
async fn an_oversized_lock_info_is_refused_and_stores_nothing() {
    let app = spawn_app().await;
    let state_id = app.create_state("lock-bounds").await;
    let a = app.start_run(&state_id, pb::RunKind::Apply).await;
    let lock_count = || async {
        sqlx::query_scalar::<_, i64>("SELECT count(*) FROM locks")
            .fetch_one(&app.admin_pool().await)
            .await
            .unwrap()
    };
    let send = |body: Vec<u8>| {
        let (app, a) = (&app, &a);
        async move {
            app.raw(
                app.http
                    .request(
                        reqwest::Method::from_bytes(b"LOCK").unwrap(),
                        &a.lock_address,
                    )
                    .basic_auth("run", Some(&a.token))
                    .header("content-type", "application/json")
                    .body(body),
            )
            .await
        }
    };
    // A 1 MB ID, a 300-character ID, and a small ID in a LockInfo of 64 KiB.
    let huge_id =
        serde_json::json!({"ID": "i".repeat(1024 * 1024), "Operation": "OperationTypeApply"});
    let long_id = serde_json::json!({"ID": "i".repeat(300), "Operation": "OperationTypeApply"});
    let padded = serde_json::json!({"ID": "short", "Info": "p".repeat(64 * 1024)});
    for (what, info) in [
        ("1 MB ID", huge_id),
        ("300-char ID", long_id),
        ("64 KiB", padded),
    ] {
        let r = send(info.to_string().into_bytes()).await;
        assert_eq!(r.status, 400, "{what}: {}", r.text());
        assert!(r.text().contains("limit"), "{what}: {}", r.text());
        assert_eq!(lock_count().await, 0, "{what}: nothing stored");
    }
    // tofu's own LockInfo (a UUID, a few hundred bytes) is fine.
    assert_eq!(app.lock(&a, &Uuid::new_v4().to_string()).await.status, 200);
    assert_eq!(lock_count().await, 1);
}
