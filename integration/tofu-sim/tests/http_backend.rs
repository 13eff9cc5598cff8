//! The http backend client against a scripted server: the exact request sequences of
//! CLIENT.md (LOCK/GET/POST?ID=/UNLOCK), LockInfo, Content-MD5, 409/423 handling,
//! -lock-timeout, 429/5xx retries, intermediate snapshots, errored.tfstate, stale plans and
//! force-unlock.
#![allow(clippy::unwrap_used, clippy::expect_used)]
mod common;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use common::mock_backend::{Mock, standard};
use common::*;
use md5::{Digest, Md5};
use serde_json::{Value, json};

const CONFIG: &str = r#"
terraform {
  backend "http" {}
}

variable "n" {
  type    = string
  default = "one"
}

resource "terraform_data" "a" {
  input = var.n
}

resource "terraform_data" "b" {
  input = terraform_data.a.output
}

resource "terraform_data" "c" {
  input = "${terraform_data.b.output}-c"
}

output "c" {
  value = terraform_data.c.output
}
"#;

fn work(mock: &Mock) -> Work {
    let mut w = Work::new();
    w.write("main.tf", CONFIG);
    for (k, v) in mock.env() {
        w.set(&k, &v);
    }
    w.ok(&["init", "-input=false"], 0);
    w
}

fn check_body_headers(r: &common::mock_backend::Req) {
    assert_eq!(
        r.headers["content-type"], "application/json",
        "{} sends JSON",
        r.method
    );
    assert_eq!(
        r.headers["content-md5"],
        STANDARD.encode(Md5::digest(&r.body)),
        "{} carries Content-MD5 of its body",
        r.method
    );
    assert_eq!(
        r.headers["authorization"],
        format!("Basic {}", STANDARD.encode("run:tok"))
    );
}

#[test]
fn plan_locks_reads_and_unlocks_and_never_writes() {
    let mock = Mock::start();
    let w = work(&mock);
    w.ok(&["plan", "-input=false", "-out=tfplan"], 0);
    assert_eq!(
        mock.sequence(),
        ["LOCK /state/lock", "GET /state", "UNLOCK /state/lock"]
    );
    let reqs = mock.requests();
    let info = reqs[0].json();
    check_body_headers(&reqs[0]);
    assert_eq!(info["Operation"], "OperationTypePlan");
    for k in [
        "ID",
        "Operation",
        "Info",
        "Who",
        "Version",
        "Created",
        "Path",
    ] {
        assert!(info.get(k).is_some(), "LockInfo has {k}");
    }
    assert!(!info["ID"].as_str().unwrap().is_empty());
    assert_eq!(reqs[2].json(), info, "UNLOCK sends the same LockInfo");
    assert_eq!(
        reqs[1].headers["authorization"],
        format!("Basic {}", STANDARD.encode("run:tok"))
    );

    mock.clear();
    w.ok(&["plan", "-lock=false"], 0);
    assert_eq!(
        mock.sequence(),
        ["GET /state"],
        "-lock=false skips LOCK and UNLOCK"
    );
}

#[test]
fn apply_writes_with_lock_id_and_serials_follow_opentofu() {
    let mock = Mock::start();
    let w = work(&mock);
    w.ok(&["apply", "-auto-approve", "-input=false"], 0);
    let reqs = mock.requests();
    let seq = mock.sequence();
    assert_eq!(seq[0], "LOCK /state/lock");
    assert_eq!(seq[1], "GET /state");
    assert_eq!(seq.last().unwrap(), "UNLOCK /state/lock");
    let id = reqs[0].json()["ID"].as_str().unwrap().to_owned();
    assert_eq!(reqs[0].json()["Operation"], "OperationTypeApply");
    let posts: Vec<_> = reqs.iter().filter(|r| r.method == "POST").collect();
    assert_eq!(
        posts.len(),
        1,
        "default 20 s interval: only the final write ({seq:?})"
    );
    assert_eq!(posts[0].path, format!("/state?ID={id}"));
    check_body_headers(posts[0]);
    assert!(
        posts[0].body.ends_with(b"}\n"),
        "compact JSON followed by a newline"
    );
    let st = posts[0].json();
    assert_eq!(st["version"], 4);
    assert_eq!(
        st["serial"], 1,
        "the first write of a new state carries serial 1"
    );
    let lineage = st["lineage"].as_str().unwrap().to_owned();
    assert_eq!(st["outputs"]["c"]["value"], "one-c");

    // No change: nothing is written.
    mock.clear();
    w.ok(&["apply", "-auto-approve"], 0);
    assert!(
        mock.requests().iter().all(|r| r.method != "POST"),
        "an unchanged state is not written"
    );

    // A change: serial + 1, same lineage.
    mock.clear();
    w.ok(&["apply", "-auto-approve", "-var", "n=two"], 0);
    let post = mock
        .requests()
        .into_iter()
        .find(|r| r.method == "POST")
        .unwrap();
    assert_eq!(post.json()["serial"], 2);
    assert_eq!(post.json()["lineage"], lineage.as_str());

    // state pull and output -json read without locking.
    mock.clear();
    let pulled = w.ok(&["state", "pull"], 0).json();
    assert_eq!(pulled["serial"], 2);
    let outs = w.ok(&["output", "-json"], 0).json();
    assert_eq!(
        outs["c"],
        json!({"sensitive": false, "type": "string", "value": "two-c"})
    );
    assert_eq!(mock.sequence(), ["GET /state", "GET /state"]);
}

#[test]
fn intermediate_snapshots_follow_the_persist_interval() {
    let mock = Mock::start();
    let mut w = work(&mock);
    w.set("TF_STATE_PERSIST_INTERVAL", "0");
    w.set("TOFU_SIM_RESOURCE_DELAY", "50ms");
    w.ok(&["apply", "-auto-approve"], 0);
    let posts: Vec<Value> = mock
        .requests()
        .iter()
        .filter(|r| r.method == "POST")
        .map(|r| r.json())
        .collect();
    assert_eq!(
        posts.len(),
        4,
        "one snapshot per resource, then the final state with the outputs"
    );
    let serials: Vec<u64> = posts
        .iter()
        .map(|p| p["serial"].as_u64().unwrap())
        .collect();
    assert_eq!(serials, [1, 2, 3, 4]);
    assert!(posts.windows(2).all(|p| p[0]["lineage"] == p[1]["lineage"]));
    assert_eq!(posts[0]["resources"].as_array().unwrap().len(), 1);
    assert_eq!(posts[2]["resources"].as_array().unwrap().len(), 3);
    assert!(posts[2]["outputs"].as_object().unwrap().is_empty());
    assert_eq!(posts[3]["outputs"]["c"]["value"], "one-c");
}

#[test]
fn retries_ride_out_5xx_and_429_then_give_up() {
    let mock = Mock::start();
    let mut w = work(&mock);
    w.set("TF_HTTP_RETRY_MAX", "3");
    mock.set_handler(|r, s| {
        let n = s.counter.entry(r.method.clone()).or_insert(0);
        *n += 1;
        if *n <= 2 && r.method != "UNLOCK" {
            return (if r.method == "GET" { 503 } else { 429 }, b"busy".to_vec());
        }
        standard(r, s)
    });
    w.ok(&["apply", "-auto-approve"], 0);
    let seq = mock.sequence();
    assert_eq!(
        seq.iter().filter(|s| s.starts_with("LOCK")).count(),
        3,
        "{seq:?}"
    );
    assert_eq!(seq.iter().filter(|s| s.starts_with("GET")).count(), 3);
    let posts: Vec<_> = mock
        .requests()
        .into_iter()
        .filter(|r| r.method == "POST")
        .collect();
    assert_eq!(posts.len(), 3);
    assert_eq!(
        posts[0].body, posts[2].body,
        "a retried POST resends the same body"
    );

    // 501 is not retried; the message names the status.
    mock.clear();
    mock.set_handler(|r, s| {
        if r.method == "GET" {
            (501, Vec::new())
        } else {
            standard(r, s)
        }
    });
    let r = w.ok(&["plan"], 1);
    assert!(
        r.all().contains("Unexpected HTTP response code 501"),
        "{}",
        r.all()
    );
    assert_eq!(
        mock.sequence()
            .iter()
            .filter(|s| s.starts_with("GET"))
            .count(),
        1
    );

    // Always 503: gives up after retry_max + 1 attempts, naming the status (as
    // go-retryablehttp's `unexpected HTTP status <Status>`); each retry is logged with it.
    mock.clear();
    mock.set_handler(|r, s| {
        if r.method == "GET" {
            (503, Vec::new())
        } else {
            standard(r, s)
        }
    });
    w.set("TF_LOG", "DEBUG");
    let r = w.ok(&["plan"], 1);
    assert!(
        r.all()
            .contains("giving up after 4 attempt(s): unexpected HTTP status 503"),
        "{}",
        r.all()
    );
    assert_eq!(
        r.stderr.matches("(status: 503): retrying in").count(),
        3,
        "{}",
        r.stderr
    );
    assert_eq!(
        mock.sequence()
            .iter()
            .filter(|s| s.starts_with("GET"))
            .count(),
        4
    );
    assert_eq!(
        mock.sequence().last().unwrap(),
        "UNLOCK /state/lock",
        "the lock is released"
    );
}

#[test]
fn lock_conflicts_report_the_holder_and_lock_timeout_retries() {
    let mock = Mock::start();
    let w = work(&mock);
    let holder = json!({"ID": "held-by-someone", "Operation": "OperationTypeApply", "Info": "", "Who": "x@y", "Version": "1.12.6", "Created": "2026-01-01T00:00:00Z", "Path": ""});
    mock.store.lock().unwrap().lock = Some(holder.clone());
    let r = w.ok(&["plan"], 1);
    assert!(
        r.all().contains("Error acquiring the state lock"),
        "{}",
        r.all()
    );
    assert!(
        r.all()
            .contains("HTTP remote state already locked: ID=held-by-someone")
    );
    assert_eq!(
        mock.sequence(),
        ["LOCK /state/lock"],
        "nothing else is sent"
    );

    // The holder goes away after two refusals: -lock-timeout retries LOCK.
    mock.clear();
    mock.set_handler(move |r, s| {
        if r.method == "LOCK" {
            let n = s.counter.entry("lock".into()).or_insert(0);
            *n += 1;
            if *n <= 2 {
                return (409, serde_json::to_vec(&holder).unwrap());
            }
            s.lock = None;
        }
        standard(r, s)
    });
    w.ok(&["plan", "-lock-timeout=30s"], 0);
    let seq = mock.sequence();
    assert_eq!(
        seq.iter().filter(|s| s.starts_with("LOCK")).count(),
        3,
        "{seq:?}"
    );

    // A conflict whose body has no holder ID ({}) is not retried.
    mock.clear();
    mock.set_handler(|r, s| {
        if r.method == "LOCK" {
            (409, b"{}".to_vec())
        } else {
            standard(r, s)
        }
    });
    w.ok(&["plan", "-lock-timeout=30s"], 1);
    assert_eq!(mock.sequence(), ["LOCK /state/lock"]);

    // Any other status is an error at once.
    mock.clear();
    mock.set_handler(|r, s| {
        if r.method == "LOCK" {
            (412, b"stale".to_vec())
        } else {
            standard(r, s)
        }
    });
    let r = w.ok(&["apply", "-auto-approve", "-lock-timeout=30s"], 1);
    assert!(
        r.all().contains("Unexpected HTTP response code 412"),
        "{}",
        r.all()
    );
    assert_eq!(mock.sequence(), ["LOCK /state/lock"]);
}

#[test]
fn failed_final_write_leaves_errored_tfstate() {
    let mock = Mock::start();
    let w = work(&mock);
    mock.set_handler(|r, s| {
        if r.method == "POST" {
            (500, Vec::new())
        } else {
            standard(r, s)
        }
    });
    let r = w.ok(&["apply", "-auto-approve"], 1);
    assert!(
        r.all().contains("Failed to persist state to backend"),
        "{}",
        r.all()
    );
    let errored: Value = serde_json::from_str(&w.read("errored.tfstate")).unwrap();
    assert_eq!(errored["resources"].as_array().unwrap().len(), 3);
    assert_eq!(errored["serial"], 1);
    assert_eq!(
        mock.sequence().last().unwrap(),
        "UNLOCK /state/lock",
        "the lock is released"
    );
    let posts = mock
        .sequence()
        .iter()
        .filter(|s| s.starts_with("POST"))
        .count();
    assert_eq!(
        posts, 3,
        "a 500 is retried TF_HTTP_RETRY_MAX (default 2) times"
    );
}

#[test]
fn saved_plans_refuse_a_changed_state() {
    let mock = Mock::start();
    let w = work(&mock);
    w.ok(&["apply", "-auto-approve"], 0);
    w.ok(&["plan", "-var=n=two", "-out=tfplan"], 0);
    // Someone else writes serial + 1.
    {
        let mut s = mock.store.lock().unwrap();
        let mut st: Value = serde_json::from_slice(s.state.as_ref().unwrap()).unwrap();
        st["serial"] = json!(st["serial"].as_u64().unwrap() + 1);
        s.state = Some(serde_json::to_vec(&st).unwrap());
    }
    mock.clear();
    let r = w.ok(&["apply", "-input=false", "tfplan"], 1);
    assert!(r.all().contains("Saved plan is stale"), "{}", r.all());
    assert!(r.all().contains("The given plan file can no longer be applied because the state was changed by another operation after the plan was created."));
    assert_eq!(
        mock.sequence(),
        ["LOCK /state/lock", "GET /state", "UNLOCK /state/lock"],
        "nothing is applied"
    );

    // A different lineage.
    {
        let mut s = mock.store.lock().unwrap();
        let mut st: Value = serde_json::from_slice(s.state.as_ref().unwrap()).unwrap();
        st["lineage"] = json!("another-lineage");
        s.state = Some(serde_json::to_vec(&st).unwrap());
    }
    let r = w.ok(&["apply", "tfplan"], 1);
    assert!(
        r.all()
            .contains("Saved plan does not match the given state"),
        "{}",
        r.all()
    );

    // Variables cannot be set with a saved plan.
    let r = w.ok(&["apply", "-var=n=x", "tfplan"], 1);
    assert!(
        r.all()
            .contains("Can't set variables when applying a saved plan")
    );
}

#[test]
fn force_unlock_sends_the_documented_body() {
    let mock = Mock::start();
    let w = work(&mock);
    let r = w.ok(&["force-unlock", "-force", "abc-123"], 0);
    assert!(r.stdout.contains("successfully unlocked"));
    let reqs = mock.requests();
    assert_eq!(mock.sequence(), ["UNLOCK /state/lock"]);
    assert_eq!(
        reqs[0].json(),
        json!({"ID": "abc-123", "Operation": "", "Info": "", "Who": "", "Version": "", "Created": "0001-01-01T00:00:00Z", "Path": ""})
    );
    // Refused by the server: exit 1.
    mock.set_handler(|_, _| (403, Vec::new()));
    w.ok(&["force-unlock", "-force", "abc-123"], 1);
}

#[test]
fn existing_query_parameters_are_kept_and_sorted() {
    let mock = Mock::start();
    let mut w = work(&mock);
    w.set("TF_HTTP_ADDRESS", &format!("{}/state?z=1&a=2", mock.base));
    w.ok(&["apply", "-auto-approve"], 0);
    let lock_id = mock.requests()[0].json()["ID"].as_str().unwrap().to_owned();
    let post = mock
        .requests()
        .into_iter()
        .find(|r| r.method == "POST")
        .unwrap();
    assert_eq!(post.path, format!("/state?ID={lock_id}&a=2&z=1"));
}

/// Transport errors (nothing listens at the address) are retried like a 5xx: retry_max + 1
/// tries, each failure logged, and the error names the last transport error.
#[test]
fn transport_errors_are_retried_then_give_up_naming_the_error() {
    let dead = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = dead.local_addr().unwrap();
    drop(dead);
    let mut w = Work::new();
    w.write("main.tf", CONFIG);
    w.set("TF_HTTP_ADDRESS", &format!("http://{addr}/state"));
    w.set("TF_HTTP_RETRY_MAX", "2");
    w.set("TF_HTTP_RETRY_WAIT_MIN", "0");
    w.set("TF_HTTP_RETRY_WAIT_MAX", "0");
    w.set("TF_LOG", "DEBUG");
    w.ok(&["init", "-input=false"], 0);
    let r = w.ok(&["plan", "-input=false"], 1);
    let url = format!("http://{addr}/state");
    assert_eq!(
        r.stderr
            .matches(&format!("[ERR] GET {url} request failed"))
            .count(),
        3,
        "{}",
        r.stderr
    );
    assert_eq!(
        r.stderr.matches(&format!("GET {url}: retrying in")).count(),
        2,
        "{}",
        r.stderr
    );
    assert!(
        r.all().contains(&format!(
            "GET {url} giving up after 3 attempt(s): Get \"{url}\": "
        )),
        "{}",
        r.all()
    );
}
