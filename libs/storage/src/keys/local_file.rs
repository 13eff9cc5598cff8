//! The local key file (embedded default): several AES-256 master keys with ids in a JSON
//! file readable only by its owner; data keys are wrapped with AES-256-GCM under the active
//! master key, with the canonical encryption context as associated data.

use std::collections::HashMap;
use std::fs::{self, DirBuilder, File, OpenOptions};
use std::io::{ErrorKind, Read, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::RwLock;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as BASE64;
use serde::{Deserialize, Serialize};

use super::{DataKey, EncryptionContext, KeyError, KeyManager, SecretKey};
use crate::BoxFuture;
use crate::envelope::{self, NONCE_BYTES, TAG_BYTES};

/// Length of a wrapped data key: nonce, 32 encrypted bytes, tag.
const WRAPPED_LEN: usize = NONCE_BYTES + 32 + TAG_BYTES;

/// The file as stored. `Debug` is deliberately not derived: it holds key material.
#[derive(Serialize, Deserialize)]
struct KeyFileContents {
    active: String,
    keys: Vec<StoredKey>,
}

#[derive(Serialize, Deserialize)]
struct StoredKey {
    id: String,
    /// Base64 of 32 bytes.
    key: String,
    created_at: String,
}

/// The decoded master keys.
struct KeySet {
    active: String,
    keys: HashMap<String, SecretKey>,
}

/// A [`KeyManager`] over a local JSON key file:
/// `{"active":"<id>","keys":[{"id":"…","key":"<base64 32 bytes>","created_at":"…"}]}`.
///
/// Unwrapping with a key id this instance does not know re-reads the file once, so keys
/// added by [`LocalKeyFile::rotate`] in another process are picked up.
pub struct LocalKeyFile {
    path: PathBuf,
    keys: RwLock<KeySet>,
}

impl std::fmt::Debug for LocalKeyFile {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LocalKeyFile")
            .field("path", &self.path)
            .finish_non_exhaustive()
    }
}

fn key_file_error(path: &Path, reason: impl Into<String>) -> KeyError {
    KeyError::KeyFile {
        path: path.to_owned(),
        reason: reason.into(),
    }
}

fn new_key_id() -> String {
    format!("local-{}", uuid::Uuid::now_v7().simple())
}

fn new_stored_key(path: &Path) -> Result<StoredKey, KeyError> {
    let key = SecretKey::random()
        .map_err(|_| key_file_error(path, "could not obtain random bytes for a new key"))?;
    Ok(StoredKey {
        id: new_key_id(),
        key: BASE64.encode(key.expose()),
        created_at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true),
    })
}

/// Reads and validates the key file, refusing one that group or others can access.
fn read_contents(path: &Path) -> Result<KeyFileContents, KeyError> {
    let mut file = File::open(path).map_err(|err| key_file_error(path, err.to_string()))?;
    let meta = file
        .metadata()
        .map_err(|err| key_file_error(path, err.to_string()))?;
    if !meta.is_file() {
        return Err(key_file_error(path, "is not a regular file"));
    }
    let mode = meta.mode() & 0o7777;
    if mode & 0o077 != 0 {
        return Err(KeyError::InsecureKeyFile {
            path: path.to_owned(),
            mode,
        });
    }
    let mut text = String::new();
    file.read_to_string(&mut text)
        .map_err(|err| key_file_error(path, err.to_string()))?;
    serde_json::from_str(&text)
        .map_err(|err| key_file_error(path, format!("is not a valid key file: {err}")))
}

fn decode(path: &Path, contents: &KeyFileContents) -> Result<KeySet, KeyError> {
    let mut keys = HashMap::with_capacity(contents.keys.len());
    for stored in &contents.keys {
        if stored.id.is_empty() {
            return Err(key_file_error(path, "holds a key with an empty id"));
        }
        let secret = BASE64
            .decode(stored.key.as_bytes())
            .ok()
            .and_then(|bytes| SecretKey::from_slice(&bytes))
            .ok_or_else(|| {
                key_file_error(
                    path,
                    format!("key {} is not base64 of exactly 32 bytes", stored.id),
                )
            })?;
        if keys.insert(stored.id.clone(), secret).is_some() {
            return Err(key_file_error(
                path,
                format!("holds key id {} twice", stored.id),
            ));
        }
    }
    if !keys.contains_key(&contents.active) {
        return Err(key_file_error(
            path,
            format!("active key {} is not among its keys", contents.active),
        ));
    }
    Ok(KeySet {
        active: contents.active.clone(),
        keys,
    })
}

fn serialize(path: &Path, contents: &KeyFileContents) -> Result<Vec<u8>, KeyError> {
    let mut bytes = serde_json::to_vec_pretty(contents)
        .map_err(|err| key_file_error(path, format!("could not be encoded: {err}")))?;
    bytes.push(b'\n');
    Ok(bytes)
}

/// Writes `bytes` to a new owner-only temporary file next to `path`, synced.
fn write_temp(path: &Path, bytes: &[u8]) -> Result<PathBuf, KeyError> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let temp = dir.join(format!(".{name}.tmp-{}", uuid::Uuid::new_v4().simple()));
    let written = (|| {
        let mut file = OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(0o600)
            .open(&temp)?;
        file.write_all(bytes)?;
        file.sync_all()
    })();
    match written {
        Ok(()) => Ok(temp),
        Err(err) => {
            let _ = fs::remove_file(&temp);
            Err(key_file_error(path, format!("could not be written: {err}")))
        }
    }
}

fn sync_parent(path: &Path) {
    if let Some(dir) = path.parent()
        && let Ok(handle) = File::open(dir)
    {
        let _ = handle.sync_all();
    }
}

impl LocalKeyFile {
    /// Opens the key file at `path`, or creates it (mode 0600, parent directories 0700)
    /// holding one fresh key. Refuses a file that group or others can access.
    pub fn open_or_create(path: impl AsRef<Path>) -> Result<Self, KeyError> {
        let path = path.as_ref().to_owned();
        // Two rounds: read, or create and read what is there (ours or a concurrent one's).
        for _ in 0..2 {
            match read_contents(&path) {
                Ok(contents) => {
                    let keys = decode(&path, &contents)?;
                    return Ok(Self {
                        path,
                        keys: RwLock::new(keys),
                    });
                }
                Err(KeyError::KeyFile { .. }) if !path.exists() => Self::create(&path)?,
                Err(err) => return Err(err),
            }
        }
        Err(key_file_error(
            &path,
            "could not be read after creating it (is it a dangling symbolic link?)",
        ))
    }

    /// Creates the key file unless one appeared meanwhile (never overwrites).
    fn create(path: &Path) -> Result<(), KeyError> {
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(dir)
                .map_err(|err| {
                    key_file_error(path, format!("could not create its directory: {err}"))
                })?;
        }
        let first = new_stored_key(path)?;
        let contents = KeyFileContents {
            active: first.id.clone(),
            keys: vec![first],
        };
        let temp = write_temp(path, &serialize(path, &contents)?)?;
        let linked = fs::hard_link(&temp, path);
        let _ = fs::remove_file(&temp);
        match linked {
            Ok(()) => {
                sync_parent(path);
                tracing::info!(path = %path.display(), key_id = %contents.active, "created local key file");
                Ok(())
            }
            Err(err) if err.kind() == ErrorKind::AlreadyExists => Ok(()),
            Err(err) => Err(key_file_error(path, format!("could not be created: {err}"))),
        }
    }

    /// Adds a fresh key to the file at `path` and makes it active; older keys stay so their
    /// data keys can still be unwrapped. Returns the new key id. Running managers pick the
    /// new key up for unwrapping on demand; they generate under it after reopening.
    pub fn rotate(path: impl AsRef<Path>) -> Result<String, KeyError> {
        let path = path.as_ref();
        let mut contents = read_contents(path)?;
        decode(path, &contents)?;
        let fresh = new_stored_key(path)?;
        let id = fresh.id.clone();
        contents.keys.push(fresh);
        contents.active = id.clone();
        let temp = write_temp(path, &serialize(path, &contents)?)?;
        if let Err(err) = fs::rename(&temp, path) {
            let _ = fs::remove_file(&temp);
            return Err(key_file_error(
                path,
                format!("could not be replaced: {err}"),
            ));
        }
        sync_parent(path);
        tracing::info!(path = %path.display(), key_id = %id, "rotated local key file");
        Ok(id)
    }

    /// The path of the key file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The id of the key new data keys are wrapped under.
    pub fn active_key_id(&self) -> String {
        self.read_keys().active.clone()
    }

    /// All key ids this instance knows.
    pub fn key_ids(&self) -> Vec<String> {
        let mut ids: Vec<String> = self.read_keys().keys.keys().cloned().collect();
        ids.sort();
        ids
    }

    fn read_keys(&self) -> std::sync::RwLockReadGuard<'_, KeySet> {
        // A poisoned lock only means another thread panicked while holding it; the key
        // set is replaced whole, so it is never half-updated.
        self.keys
            .read()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    fn master_key(&self, key_id: &str) -> Option<SecretKey> {
        self.read_keys().keys.get(key_id).cloned()
    }

    /// Re-reads the file and replaces the in-memory key set; the active key stays as it
    /// was so a running manager's writes do not change key on their own.
    fn reload(&self) -> Result<(), KeyError> {
        let contents = read_contents(&self.path)?;
        let fresh = decode(&self.path, &contents)?;
        let mut guard = self
            .keys
            .write()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let active = if fresh.keys.contains_key(&guard.active) {
            guard.active.clone()
        } else {
            fresh.active.clone()
        };
        *guard = KeySet {
            active,
            keys: fresh.keys,
        };
        Ok(())
    }

    fn generate(&self, ctx: &EncryptionContext) -> Result<DataKey, KeyError> {
        let (key_id, master) = {
            let keys = self.read_keys();
            let master = keys
                .keys
                .get(&keys.active)
                .cloned()
                .expect("decode() checked that the active key is in the set");
            (keys.active.clone(), master)
        };
        let plaintext = SecretKey::random().map_err(|_| {
            KeyError::Unavailable("could not obtain random bytes for a data key".to_owned())
        })?;
        let sealed = envelope::seal(master.expose(), &ctx.canonical_bytes(), plaintext.expose())
            .map_err(|err| KeyError::Unavailable(format!("wrapping a data key failed: {err}")))?;
        let mut wrapped = Vec::with_capacity(WRAPPED_LEN);
        wrapped.extend_from_slice(&sealed.nonce);
        wrapped.extend_from_slice(&sealed.ciphertext);
        Ok(DataKey {
            key_id,
            plaintext,
            wrapped,
        })
    }

    fn unwrap(
        &self,
        key_id: &str,
        wrapped: &[u8],
        ctx: &EncryptionContext,
    ) -> Result<SecretKey, KeyError> {
        let master = match self.master_key(key_id) {
            Some(master) => master,
            None => {
                self.reload()?;
                self.master_key(key_id).ok_or_else(|| {
                    tracing::warn!(key_id, "wrapped data key names an unknown local key");
                    KeyError::UnknownKeyId {
                        key_id: key_id.to_owned(),
                        manager: format!("local key file {}", self.path.display()),
                    }
                })?
            }
        };
        let invalid = |detail: String| {
            tracing::warn!(key_id, "local key file refused a wrapped data key");
            KeyError::InvalidCiphertext {
                key_id: key_id.to_owned(),
                detail,
            }
        };
        if wrapped.len() != WRAPPED_LEN {
            return Err(invalid(format!(
                "wrapped key is {} bytes long, expected {WRAPPED_LEN}",
                wrapped.len()
            )));
        }
        let (nonce, ciphertext) = wrapped.split_at(NONCE_BYTES);
        let opened = envelope::open(master.expose(), nonce, &ctx.canonical_bytes(), ciphertext)
            .map_err(|err| invalid(err.to_string()))?;
        let key = SecretKey::from_slice(&opened)
            .ok_or_else(|| invalid("decrypted value is not 32 bytes".to_owned()));
        let mut opened = opened;
        opened.fill(0);
        key
    }
}

impl KeyManager for LocalKeyFile {
    fn generate_data_key<'a>(
        &'a self,
        ctx: &'a EncryptionContext,
    ) -> BoxFuture<'a, Result<DataKey, KeyError>> {
        Box::pin(async move { self.generate(ctx) })
    }

    fn unwrap_data_key<'a>(
        &'a self,
        key_id: &'a str,
        wrapped: &'a [u8],
        ctx: &'a EncryptionContext,
    ) -> BoxFuture<'a, Result<SecretKey, KeyError>> {
        Box::pin(async move { self.unwrap(key_id, wrapped, ctx) })
    }

    fn describe(&self) -> String {
        format!("local key file {}", self.path.display())
    }
}
