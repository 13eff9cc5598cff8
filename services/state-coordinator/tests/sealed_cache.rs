//! The sealed cache: a GET of the generation this process just wrote (or read) asks the
//! object store only whether that version still exists with that length, and serves the
//! bytes it kept; everything else about a read stays: the bytes served are the database's
//! current generation, a version deleted outside Cairn still fences the state, and another
//! generation's bytes are never served. On S3 and on the file store.
#![allow(clippy::unwrap_used, clippy::expect_used)]

mod common;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use cairn_proto::state as pb;
use cairn_storage::{BoxFuture, ObjectError, ObjectStore, ObjectVersion};
use common::{Options, Store, TestApp, WrapObjects, spawn_app_with, state_doc};
use uuid::Uuid;

/// Delegates to the test's store and counts the reads of whole objects and the
/// confirmations asked for.
struct CountingObjects {
    inner: Arc<dyn ObjectStore>,
    gets: AtomicU64,
    confirms: AtomicU64,
}

impl ObjectStore for CountingObjects {
    fn put_new<'a>(
        &'a self,
        key: &'a str,
        body: Bytes,
    ) -> BoxFuture<'a, Result<ObjectVersion, ObjectError>> {
        self.inner.put_new(key, body)
    }

    fn get<'a>(
        &'a self,
        key: &'a str,
        version_id: &'a str,
    ) -> BoxFuture<'a, Result<Bytes, ObjectError>> {
        self.gets.fetch_add(1, Ordering::SeqCst);
        self.inner.get(key, version_id)
    }

    fn confirm<'a>(&'a self, key: &'a str, version_id: &'a str, len: u64) -> BoxFuture<'a, bool> {
        self.confirms.fetch_add(1, Ordering::SeqCst);
        self.inner.confirm(key, version_id, len)
    }

    fn delete<'a>(
        &'a self,
        key: &'a str,
        version_id: &'a str,
    ) -> BoxFuture<'a, Result<(), ObjectError>> {
        self.inner.delete(key, version_id)
    }

    fn list<'a>(
        &'a self,
        prefix: &'a str,
    ) -> BoxFuture<'a, Result<Vec<ObjectVersion>, ObjectError>> {
        self.inner.list(prefix)
    }

    fn self_check(&self) -> BoxFuture<'_, Result<(), ObjectError>> {
        self.inner.self_check()
    }

    fn describe(&self) -> String {
        format!("counting {}", self.inner.describe())
    }
}

impl CountingObjects {
    fn counts(&self) -> (u64, u64) {
        (
            self.gets.load(Ordering::SeqCst),
            self.confirms.load(Ordering::SeqCst),
        )
    }
}

async fn counting_app(store: Store) -> (TestApp, Arc<CountingObjects>) {
    let slot: Arc<std::sync::Mutex<Option<Arc<CountingObjects>>>> = Arc::default();
    let wrap_slot = slot.clone();
    let wrap: WrapObjects = Arc::new(move |inner: Arc<dyn ObjectStore>| -> Arc<dyn ObjectStore> {
        let counting = Arc::new(CountingObjects {
            inner,
            gets: AtomicU64::new(0),
            confirms: AtomicU64::new(0),
        });
        *wrap_slot.lock().unwrap() = Some(counting.clone());
        counting
    });
    let app = spawn_app_with(Options {
        store,
        wrap_objects: Some(wrap),
        ..Options::default()
    })
    .await;
    let counting = slot.lock().unwrap().clone().expect("the store was wrapped");
    (app, counting)
}

async fn a_get_after_a_write_confirms_the_version_and_reads_no_object(store: Store) {
    let (app, objects) = counting_app(store).await;
    let state_id = app.create_state("sealed-cache-hit").await;
    let a = app.start_run(&state_id, pb::RunKind::Apply).await;
    let lock_id = Uuid::new_v4().to_string();
    assert_eq!(app.lock(&a, &lock_id).await.status, 200);
    let doc1 = state_doc(1, "lin-cache", "one");
    assert_eq!(app.post(&a, &lock_id, &doc1).await.status, 200);

    let before = objects.counts();
    let got = app.get(&a).await;
    assert_eq!((got.status, &got.body), (200, &doc1), "{}", got.text());
    assert_eq!(
        objects.counts(),
        (before.0, before.1 + 1),
        "the writer's GET: one confirmation, no object read"
    );

    // Another run's first GET (a token never seen: nothing read ahead) is served the same way.
    let reader = app.start_run(&state_id, pb::RunKind::Plan).await;
    let before = objects.counts();
    let got = app.get(&reader).await;
    assert_eq!((got.status, &got.body), (200, &doc1));
    assert_eq!(objects.counts(), (before.0, before.1 + 1));

    // The next generation replaces the kept one: its bytes are served, never generation 1's.
    let doc2 = state_doc(2, "lin-cache", "two");
    assert_eq!(app.post(&a, &lock_id, &doc2).await.status, 200);
    let before = objects.counts();
    for who in [&a, &reader] {
        let got = app.get(who).await;
        assert_eq!((got.status, &got.body), (200, &doc2));
    }
    assert_eq!(objects.counts(), (before.0, before.1 + 2));
    assert_eq!(app.state_info(&state_id).await.current_generation, 2);
}

#[tokio::test]
async fn a_get_after_a_write_confirms_the_version_and_reads_no_object_on_s3() {
    a_get_after_a_write_confirms_the_version_and_reads_no_object(Store::S3).await;
}

#[tokio::test]
async fn a_get_after_a_write_confirms_the_version_and_reads_no_object_on_the_file_store() {
    a_get_after_a_write_confirms_the_version_and_reads_no_object(Store::File).await;
}

/// The kept bytes of a version deleted outside Cairn are not served: the store does not
/// confirm it, the object is read, its absence is proof of damage and the state is fenced.
#[tokio::test]
async fn a_kept_object_whose_version_was_deleted_fences_the_state() {
    let (app, objects) = counting_app(Store::S3).await;
    let state_id = app.create_state("sealed-cache-gone").await;
    app.apply_doc(&state_id, &state_doc(1, "lin-gone", "one"))
        .await;
    let g = app.generation_row(&state_id, 1).await;
    app.bucket_delete(&g.object_key, &g.object_version).await;

    let reader = app.start_run(&state_id, pb::RunKind::Plan).await;
    let before = objects.counts();
    let got = app.get(&reader).await;
    assert_eq!(got.status, 422, "{}", got.text());
    assert!(got.text().contains("does not exist"), "{}", got.text());
    assert_eq!(
        objects.counts(),
        (before.0 + 1, before.1 + 1),
        "not confirmed, then read from the store"
    );
    assert_eq!(
        app.state_info(&state_id).await.status,
        pb::StateStatus::RecoveryRequired as i32
    );
    // Fenced, whatever is kept.
    let again = app.get(&reader).await;
    assert_eq!(again.status, 422, "{}", again.text());
}
