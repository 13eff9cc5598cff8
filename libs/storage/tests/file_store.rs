//! Local directory object store: the same behaviours as S3, in a temporary directory.
#![allow(clippy::unwrap_used)]

mod common;

use std::os::unix::fs::PermissionsExt;
use std::sync::Arc;

use bytes::Bytes;
use cairn_storage::{FileObjectStore, ObjectError, ObjectStore};

#[tokio::test]
async fn put_get_list_delete_round_trip() {
    let dir = common::temp_dir("file-rt");
    let root = dir.join("store");
    let store: Arc<dyn ObjectStore> = Arc::new(FileObjectStore::new(&root));
    store.self_check().await.unwrap();
    assert!(root.is_dir());

    let first = store
        .put_new("cairn/web.tfstate", Bytes::from_static(b"one"))
        .await
        .unwrap();
    let second = store
        .put_new("cairn/db.tfstate", Bytes::from_static(b"two"))
        .await
        .unwrap();
    assert_eq!(first.version_id.len(), 32);
    let path = root.join("cairn/web.tfstate").join(&first.version_id);
    assert_eq!(std::fs::read(&path).unwrap(), b"one");
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );

    assert_eq!(
        store.get(&first.key, &first.version_id).await.unwrap(),
        Bytes::from_static(b"one")
    );
    assert_eq!(
        store.get(&second.key, &second.version_id).await.unwrap(),
        Bytes::from_static(b"two")
    );

    let mut expected = vec![first.clone(), second.clone()];
    expected.sort();
    assert_eq!(store.list("").await.unwrap(), expected);
    assert_eq!(store.list("cairn/").await.unwrap(), expected);
    assert_eq!(store.list("cairn/web").await.unwrap(), vec![first.clone()]);
    assert!(store.list("other/").await.unwrap().is_empty());

    store.delete(&first.key, &first.version_id).await.unwrap();
    store.delete(&first.key, &first.version_id).await.unwrap();
    store
        .delete("never/written", &first.version_id)
        .await
        .unwrap();
    assert_eq!(store.list("").await.unwrap(), vec![second.clone()]);

    // With its only version gone, the key can be created again, under a new version.
    let again = store
        .put_new("cairn/web.tfstate", Bytes::from_static(b"three"))
        .await
        .unwrap();
    assert_ne!(again.version_id, first.version_id);
    // No temporary files are left behind.
    let leftovers: Vec<_> = std::fs::read_dir(root.join("cairn/web.tfstate"))
        .unwrap()
        .map(|e| e.unwrap().file_name().into_string().unwrap())
        .collect();
    assert_eq!(leftovers, vec![again.version_id.clone()]);
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn several_versions_of_a_key_are_listed() {
    let dir = common::temp_dir("file-versions");
    let store = FileObjectStore::new(&dir);
    let first = store.put_new("k", Bytes::from_static(b"1")).await.unwrap();
    // A second version appears next to the first (e.g. restored from a backup).
    let extra = "0123456789abcdef0123456789abcdef";
    std::fs::write(dir.join("k").join(extra), b"2").unwrap();
    let listed = store.list("").await.unwrap();
    assert_eq!(listed.len(), 2);
    assert!(listed.contains(&first));
    assert_eq!(
        store.get("k", extra).await.unwrap(),
        Bytes::from_static(b"2")
    );
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn put_new_never_overwrites() {
    let dir = common::temp_dir("file-no-overwrite");
    let store = FileObjectStore::new(&dir);
    let first = store
        .put_new("a.tfstate", Bytes::from_static(b"original"))
        .await
        .unwrap();
    let err = store
        .put_new("a.tfstate", Bytes::from_static(b"replacement"))
        .await
        .unwrap_err();
    assert!(
        matches!(&err, ObjectError::AlreadyExists { key } if key == "a.tfstate"),
        "{err:?}"
    );
    assert!(!err.is_damage());
    assert_eq!(
        store.get("a.tfstate", &first.version_id).await.unwrap(),
        Bytes::from_static(b"original")
    );
    assert_eq!(store.list("").await.unwrap(), vec![first]);
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn concurrent_creates_of_one_key_let_one_win() {
    let dir = common::temp_dir("file-race");
    let store = Arc::new(FileObjectStore::new(&dir));
    let mut tasks = Vec::new();
    for i in 0..8u8 {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            store.put_new("race", Bytes::from(vec![i])).await
        }));
    }
    let mut won = 0;
    for task in tasks {
        match task.await.unwrap() {
            Ok(_) => won += 1,
            Err(ObjectError::AlreadyExists { .. }) => {}
            Err(other) => panic!("unexpected error {other:?}"),
        }
    }
    assert_eq!(won, 1);
    assert_eq!(store.list("race").await.unwrap().len(), 1);
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn missing_object_or_version_is_damage() {
    let dir = common::temp_dir("file-missing");
    let store = FileObjectStore::new(&dir);
    let version = store
        .put_new("present", Bytes::from_static(b"x"))
        .await
        .unwrap();

    let err = store
        .get("never-written", &version.version_id)
        .await
        .unwrap_err();
    assert!(matches!(err, ObjectError::NotFound { .. }), "{err:?}");
    assert!(err.is_damage());

    let err = store
        .get("present", "ffffffffffffffffffffffffffffffff")
        .await
        .unwrap_err();
    assert!(err.is_damage(), "{err:?}");
    let err = store.get("present", "not-a-version").await.unwrap_err();
    assert!(err.is_damage(), "{err:?}");

    store.delete("present", &version.version_id).await.unwrap();
    let err = store.get("present", &version.version_id).await.unwrap_err();
    assert!(
        matches!(&err, ObjectError::NotFound { key, version_id } if key == "present" && *version_id == version.version_id),
        "{err:?}"
    );
    assert!(err.is_damage());
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn missing_directory_is_unavailable_not_damage() {
    let dir = common::temp_dir("file-gone");
    let root = dir.join("store");
    let store = FileObjectStore::new(&root);
    store.self_check().await.unwrap();
    let version = store.put_new("k", Bytes::from_static(b"x")).await.unwrap();
    // The volume disappears (unmounted, deleted): nothing may look like a missing object.
    std::fs::remove_dir_all(&root).unwrap();
    let err = store.get("k", &version.version_id).await.unwrap_err();
    assert!(matches!(err, ObjectError::Unavailable(_)), "{err:?}");
    assert!(!err.is_damage());
    assert!(err.to_string().contains("does not exist"), "{err}");
    for err in [
        store.list("").await.unwrap_err(),
        store.delete("k", &version.version_id).await.unwrap_err(),
        store
            .put_new("k2", Bytes::from_static(b"x"))
            .await
            .unwrap_err(),
    ] {
        assert!(matches!(err, ObjectError::Unavailable(_)), "{err:?}");
    }
    // put_new did not quietly recreate the directory.
    assert!(!root.exists());
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn self_check_fails_on_an_unwritable_directory() {
    let dir = common::temp_dir("file-readonly");
    // A plain file where the directory should be: neither creatable nor writable, also
    // for root (which ignores permission bits).
    let blocked = dir.join("blocked");
    std::fs::write(&blocked, b"not a directory").unwrap();
    let store = FileObjectStore::new(blocked.join("store"));
    let err = store.self_check().await.unwrap_err();
    assert!(matches!(err, ObjectError::Unavailable(_)), "{err:?}");
    assert!(!err.is_damage());
    assert!(err.to_string().contains("writable"), "{err}");
    std::fs::remove_dir_all(dir).unwrap();
}

#[tokio::test]
async fn invalid_keys_are_refused() {
    let dir = common::temp_dir("file-keys");
    let store = FileObjectStore::new(&dir);
    for key in [
        "",
        "/etc/passwd",
        "a//b",
        "../escape",
        "a/./b",
        "trailing/",
        "back\\slash",
        "0123456789abcdef0123456789abcdef/x",
    ] {
        let err = store
            .put_new(key, Bytes::from_static(b"x"))
            .await
            .unwrap_err();
        assert!(
            matches!(err, ObjectError::InvalidKey { .. }),
            "{key}: {err:?}"
        );
        assert!(!err.is_damage());
    }
    assert!(store.list("").await.unwrap().is_empty());
    std::fs::remove_dir_all(dir).unwrap();
}

/// A put killed between creating its temporary file and linking the version leaves a
/// `.tmp-*` file (and possibly the key's otherwise empty directory); the sweep removes those
/// older than its age, and never a stored version or a young temporary file.
#[tokio::test]
async fn partial_files_of_killed_writes_are_swept_once_old() {
    let dir = common::temp_dir("file-sweep");
    let root = dir.join("store");
    let store: Arc<dyn ObjectStore> = Arc::new(FileObjectStore::new(&root));
    store.self_check().await.unwrap();
    let kept = store
        .put_new("cairn/web.tfstate/g1", Bytes::from_static(b"one"))
        .await
        .unwrap();
    let old = std::time::SystemTime::now() - std::time::Duration::from_secs(7200);
    let partial = |rel: &str, modified: std::time::SystemTime| {
        let path = root.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        let file = std::fs::File::create(&path).unwrap();
        std::io::Write::write_all(&mut &file, b"half a ciphert").unwrap();
        file.set_modified(modified).unwrap();
        path
    };
    let orphan = partial("cairn/web.tfstate/g2/.tmp-0123456789abcdef", old);
    let beside = partial("cairn/web.tfstate/g1/.tmp-fedcba9876543210", old);
    let young = partial(
        "cairn/db.tfstate/g1/.tmp-00112233aabbccdd",
        std::time::SystemTime::now(),
    );

    assert_eq!(
        store
            .sweep_partial(std::time::Duration::from_secs(3600))
            .await
            .unwrap(),
        2
    );
    assert!(!orphan.exists() && !beside.exists());
    assert!(
        !root.join("cairn/web.tfstate/g2").exists(),
        "the directory that only held the partial file is gone"
    );
    assert!(young.exists(), "a write in progress keeps its file");
    assert_eq!(
        store.get(&kept.key, &kept.version_id).await.unwrap(),
        Bytes::from_static(b"one")
    );
    assert_eq!(store.list("").await.unwrap(), vec![kept]);
    // Nothing left to do: a second pass removes nothing.
    assert_eq!(
        store
            .sweep_partial(std::time::Duration::from_secs(3600))
            .await
            .unwrap(),
        0
    );
}
