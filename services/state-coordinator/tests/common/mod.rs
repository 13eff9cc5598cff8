//! Test harness: `spawn_app()` starts a real coordinator on port 0 against a fresh
//! database, its own NATS prefix, its own bucket and KMS key in moto (reached through fault
//! proxies the test controls), and returns typed clients. `Options::store` picks the object
//! store: the bucket (default) or the file store in a temporary directory (the embedded
//! default of README command 1); tests of what both must do run once per store.
#![allow(dead_code, clippy::unwrap_used, clippy::expect_used)]

use std::sync::Arc;
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use cairn_auth::Role;
use cairn_proto::state as pb;
pub use cairn_state_coordinator::testing::OBJECT_PREFIX;
use cairn_state_coordinator::testing::{Fixtures, aws_edges, grpc_channel, test_config};
use cairn_state_coordinator::{Config, Server};
use cairn_storage::{FileObjectStore, KmsKeyManager, ObjectError, ObjectVersion};
pub use cairn_testkit::{Authed, Bearer};
use cairn_testkit::{FaultProxy, TestAws, TestKeys, TestNats};
use md5::{Digest, Md5};
use tonic::transport::Channel;
use uuid::Uuid;

pub use pb::recovery_client::RecoveryClient;
pub use pb::runs_client::RunsClient;
pub use pb::states_client::StatesClient;

/// The object store a test's coordinator uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Store {
    /// The test's own bucket in moto, through `s3_proxy`.
    #[default]
    S3,
    /// A `FileObjectStore` in a temporary directory of the test.
    File,
}

/// Default options on `store`.
pub fn on(store: Store) -> Options {
    Options {
        store,
        ..Options::default()
    }
}

/// Knobs for `spawn_app_with`.
#[derive(Clone)]
pub struct Options {
    pub store: Store,
    pub lease: Duration,
    pub max_state_bytes: usize,
    /// The limit of a saved plan, a masked plan JSON and a root config.
    pub max_plan_bytes: usize,
    pub pending_ttl: Duration,
    pub after_restore: bool,
    /// Replaces the KMS key manager (through `kms_proxy`) when set.
    pub keys: Option<Arc<dyn cairn_storage::KeyManager>>,
    /// Wraps the object store (S3 through `s3_proxy`, or the file store) when set.
    pub wrap_objects: Option<WrapObjects>,
    /// The coordinator reaches PostgreSQL through a fault proxy of its own (`db_proxy`).
    pub db_proxy: bool,
}

/// See [`Options::wrap_objects`].
pub type WrapObjects = Arc<
    dyn Fn(Arc<dyn cairn_storage::ObjectStore>) -> Arc<dyn cairn_storage::ObjectStore>
        + Send
        + Sync,
>;

impl Default for Options {
    fn default() -> Self {
        Self {
            lease: Duration::from_secs(60),
            max_state_bytes: 8 * 1024 * 1024,
            max_plan_bytes: 64 * 1024 * 1024,
            pending_ttl: Duration::from_secs(3600),
            after_restore: false,
            keys: None,
            wrap_objects: None,
            db_proxy: false,
            store: Store::S3,
        }
    }
}

pub struct TestApp {
    pub server: Option<Server>,
    pub grpc: Channel,
    pub http_base: String,
    pub keys: TestKeys,
    pub db: cairn_db::TestDatabase,
    pub aws: TestAws,
    pub nats: TestNats,
    pub s3_proxy: FaultProxy,
    pub kms_proxy: FaultProxy,
    /// Between the coordinator and PostgreSQL, with `Options::db_proxy`.
    pub db_proxy: Option<FaultProxy>,
    pub store: Store,
    /// The file store's directory (`Store::File`); removed with the test.
    pub objects_dir: Option<cairn_testkit::TempDir>,
    /// The coordinator's fixtures for this test's tenant and instance (as a service).
    pub fx: Fixtures,
    /// `fx.tenant` and `fx.instance`.
    pub tenant: Uuid,
    pub instance: Uuid,
    pub http: reqwest::Client,
}

pub async fn spawn_app() -> TestApp {
    spawn_app_with(Options::default()).await
}

pub async fn spawn_app_with(opts: Options) -> TestApp {
    try_spawn_app_with(opts).await.expect("start coordinator")
}

/// Like `spawn_app_with`, but returns the coordinator's refusal to start.
pub async fn try_spawn_app_with(
    opts: Options,
) -> Result<TestApp, cairn_state_coordinator::StartError> {
    cairn_testkit::init_tracing();
    let db = cairn_testkit::fresh_database().await;
    let aws = TestAws::create().await;
    let nats = cairn_testkit::connect_nats().await;
    let keys = TestKeys::new();
    let s3_proxy = FaultProxy::start_for_url(&aws.endpoint)
        .await
        .expect("s3 proxy");
    let kms_proxy = FaultProxy::start_for_url(&aws.endpoint)
        .await
        .expect("kms proxy");
    let mut edges = aws_edges(
        &aws,
        &s3_proxy.url_for(&aws.endpoint),
        &kms_proxy.url_for(&aws.endpoint),
    );
    if let Some(keys) = &opts.keys {
        edges.keys = Some(keys.clone());
    }
    let objects_dir = match opts.store {
        Store::S3 => None,
        Store::File => {
            let dir = cairn_testkit::temp_dir();
            edges.objects = Some(Arc::new(FileObjectStore::new(dir.path().join("objects"))));
            Some(dir)
        }
    };
    if let Some(wrap) = &opts.wrap_objects {
        edges.objects = edges.objects.take().map(|objects| wrap(objects));
    }
    let db_proxy = if opts.db_proxy {
        Some(
            FaultProxy::start_for_url(&db.runtime_url)
                .await
                .expect("database proxy"),
        )
    } else {
        None
    };
    let mut config = Config {
        run_lease: opts.lease,
        max_state_bytes: opts.max_state_bytes,
        max_plan_bytes: opts.max_plan_bytes,
        pending_ttl: opts.pending_ttl,
        after_restore: opts.after_restore,
        ..test_config(&db, &nats, &aws, &keys)
    };
    if let Some(proxy) = &db_proxy {
        config.db.database_url = proxy.url_for(&db.runtime_url);
    }
    let server = Server::start_with(config, edges).await?;
    let grpc = grpc_channel(&server).await;
    let http_base = format!("http://{}", server.http_addr());
    let fx = Fixtures::new(grpc.clone(), keys.service_token());
    Ok(TestApp {
        server: Some(server),
        grpc,
        http_base,
        keys,
        db,
        aws,
        nats,
        s3_proxy,
        kms_proxy,
        db_proxy,
        store: opts.store,
        objects_dir,
        tenant: fx.tenant,
        instance: fx.instance,
        fx,
        http: reqwest::Client::builder()
            .pool_max_idle_per_host(0)
            .build()
            .unwrap(),
    })
}

/// An admitted attempt with everything tofu would be given.
#[derive(Clone, Debug)]
pub struct Admitted {
    pub run_id: String,
    pub attempt: u32,
    pub state_id: String,
    pub token: String,
    pub address: String,
    pub lock_address: String,
    pub base_generation: u64,
    pub read_only: bool,
    pub interrupted: bool,
    pub plan_current: bool,
}

/// A plain response: status and body.
#[derive(Debug)]
pub struct Resp {
    pub status: u16,
    pub body: Vec<u8>,
}

impl Resp {
    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
}

pub fn md5_b64(body: &[u8]) -> String {
    STANDARD.encode(Md5::digest(body))
}

pub fn lock_info(id: &str, op: &str) -> String {
    serde_json::json!({
        "ID": id, "Operation": op, "Info": "", "Who": "test@host",
        "Version": "1.12.6", "Created": "2026-11-29T12:00:00.000000000Z", "Path": ""
    })
    .to_string()
}

/// A minimal OpenTofu v4 state with one output (and a sensitive one).
pub fn state_doc(serial: u64, lineage: &str, value: &str) -> Vec<u8> {
    let mut v = serde_json::to_vec(&serde_json::json!({
        "version": 4, "terraform_version": "1.12.6", "serial": serial, "lineage": lineage,
        "outputs": {
            "name": {"value": value, "type": "string"},
            "password": {"value": "s3cr3t-canary", "type": "string", "sensitive": true}
        },
        "resources": [], "check_results": null
    }))
    .unwrap();
    v.push(b'\n');
    v
}

impl TestApp {
    /// Polls the database clock until the lease of `attempt` of `run_id` has expired.
    pub async fn wait_lease_expired(&self, run_id: &str, attempt: u32) {
        let pool = self.admin_pool().await;
        let run = Uuid::parse_str(run_id).unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(30);
        loop {
            let expired: bool = sqlx::query_scalar(
                "SELECT lease_expires_at <= now() FROM attempts WHERE run_id = $1 AND attempt = $2",
            )
            .bind(run)
            .bind(i32::try_from(attempt).unwrap())
            .fetch_one(&pool)
            .await
            .unwrap();
            if expired {
                return;
            }
            assert!(
                std::time::Instant::now() < deadline,
                "the lease of attempt {attempt} of run {run_id} did not expire within 30 s"
            );
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    }
}

impl TestApp {
    pub fn server(&self) -> &Server {
        self.server.as_ref().expect("server running")
    }

    pub fn service_token(&self) -> String {
        self.keys.service_token()
    }

    pub fn user_token(&self, role: Role) -> String {
        self.keys.user_token(self.tenant, role)
    }

    /// A platform admin (VerifyAll, after-restore mode).
    pub fn platform_admin_token(&self) -> String {
        self.keys.sign(
            &cairn_auth::Claims::new_user(
                "platform-admin",
                self.tenant,
                Role::Admin,
                cairn_testkit::tokens::TOKEN_TTL,
            )
            .with_scopes(["platform:admin"]),
        )
    }

    fn bearer(&self, token: &str) -> Bearer {
        Bearer(Arc::from(token))
    }

    pub fn states(&self, token: &str) -> StatesClient<Authed> {
        StatesClient::with_interceptor(self.grpc.clone(), self.bearer(token))
    }

    pub fn runs(&self, token: &str) -> RunsClient<Authed> {
        RunsClient::with_interceptor(self.grpc.clone(), self.bearer(token))
    }

    pub fn recovery(&self, token: &str) -> RecoveryClient<Authed> {
        RecoveryClient::with_interceptor(self.grpc.clone(), self.bearer(token))
    }

    /// Creates a state for this test's tenant and instance; returns its id.
    pub async fn create_state(&self, physical_name: &str) -> String {
        self.fx.create_state(physical_name).await
    }

    /// A registration of a new run of the default test run (`RunSpec::default()`).
    pub fn registration(
        &self,
        state_id: &str,
        kind: pb::RunKind,
        env: &str,
    ) -> pb::RegisterRunRequest {
        self.fx.registration(state_id, kind, env)
    }

    /// Registers a run and returns its id.
    pub async fn register(&self, state_id: &str, kind: pb::RunKind, env: &str) -> String {
        self.fx.register(state_id, kind, env).await
    }

    pub async fn admit(&self, run_id: &str) -> Result<Admitted, tonic::Status> {
        let a = self.fx.admit(run_id).await?;
        let backend = a.backend.expect("backend addresses");
        let state_id = backend.address.rsplit('/').next().unwrap().to_owned();
        Ok(Admitted {
            run_id: a.run_id,
            attempt: a.attempt,
            state_id,
            token: a.run_token,
            address: backend.address,
            lock_address: backend.lock_address,
            base_generation: a.base_generation,
            read_only: a.read_only,
            interrupted: a.interrupted,
            plan_current: a.plan_current,
        })
    }

    /// Register + admit in one go.
    pub async fn start_run(&self, state_id: &str, kind: pb::RunKind) -> Admitted {
        let run = self.register(state_id, kind, "dev").await;
        self.admit(&run).await.expect("admit")
    }

    pub async fn finish(&self, a: &Admitted, outcome: pb::RunOutcome) -> pb::FinishRunResponse {
        self.fx.finish(&a.run_id, a.attempt, outcome, "").await
    }

    async fn send(
        &self,
        method: &str,
        url: &str,
        token: Option<&str>,
        body: Option<Vec<u8>>,
    ) -> Resp {
        let mut req = self
            .http
            .request(reqwest::Method::from_bytes(method.as_bytes()).unwrap(), url);
        if let Some(t) = token {
            req = req.basic_auth("run", Some(t));
        }
        if let Some(b) = body {
            req = req
                .header("content-type", "application/json")
                .header("content-md5", md5_b64(&b))
                .body(b);
        }
        let resp = req.send().await.expect("http request");
        Resp {
            status: resp.status().as_u16(),
            body: resp.bytes().await.expect("body").to_vec(),
        }
    }

    /// A raw request with full control (custom headers), for protocol tests.
    pub async fn raw(&self, req: reqwest::RequestBuilder) -> Resp {
        let resp = req.send().await.expect("http request");
        Resp {
            status: resp.status().as_u16(),
            body: resp.bytes().await.expect("body").to_vec(),
        }
    }

    pub async fn get(&self, a: &Admitted) -> Resp {
        self.send("GET", &a.address, Some(&a.token), None).await
    }

    pub async fn lock(&self, a: &Admitted, lock_id: &str) -> Resp {
        self.send(
            "LOCK",
            &a.lock_address,
            Some(&a.token),
            Some(lock_info(lock_id, "OperationTypeApply").into_bytes()),
        )
        .await
    }

    pub async fn unlock(&self, a: &Admitted, lock_id: &str) -> Resp {
        self.send(
            "UNLOCK",
            &a.lock_address,
            Some(&a.token),
            Some(lock_info(lock_id, "OperationTypeApply").into_bytes()),
        )
        .await
    }

    pub async fn post(&self, a: &Admitted, lock_id: &str, body: &[u8]) -> Resp {
        let url = format!("{}?ID={lock_id}", a.address);
        self.send("POST", &url, Some(&a.token), Some(body.to_vec()))
            .await
    }

    pub async fn state_info(&self, state_id: &str) -> pb::State {
        self.fx.state(state_id).await
    }

    /// Runs SQL against the test database as its owner (for inspection and sabotage).
    pub async fn admin_pool(&self) -> sqlx::PgPool {
        cairn_db::connect(&cairn_db::PoolSettings::new(
            self.db.migrate_url.clone(),
            "state",
        ))
        .unwrap()
    }

    /// Writes `doc` as one full apply: lock, get, post, unlock, finish.
    pub async fn apply_doc(&self, state_id: &str, doc: &[u8]) -> Admitted {
        let a = self.start_run(state_id, pb::RunKind::Apply).await;
        let lock_id = Uuid::new_v4().to_string();
        assert_eq!(self.lock(&a, &lock_id).await.status, 200);
        let got = self.get(&a).await.status;
        assert!(got == 200 || got == 404, "GET {got}");
        let r = self.post(&a, &lock_id, doc).await;
        assert_eq!(r.status, 200, "POST: {}", r.text());
        assert_eq!(self.unlock(&a, &lock_id).await.status, 200);
        self.finish(&a, pb::RunOutcome::Succeeded).await;
        a
    }
}

// ---- Fail-closed helpers: damage, faults, events (fence/faults/crash_windows/recovery) ----

impl TestApp {
    /// The coordinator's use cases (pool, caches, failpoints).
    pub fn core(&self) -> &cairn_state_coordinator::app::App {
        self.server().app()
    }

    /// The state row as the coordinator stores it.
    pub async fn state_row(
        &self,
        state_id: &str,
    ) -> cairn_state_coordinator::store::states::StateRow {
        let mut conn = self.core().pool.acquire().await.unwrap();
        cairn_state_coordinator::store::states::state_get(&mut conn, state_id.parse().unwrap())
            .await
            .unwrap()
            .expect("state row")
    }

    /// One generation row as the coordinator stores it.
    pub async fn generation_row(
        &self,
        state_id: &str,
        generation: i64,
    ) -> cairn_state_coordinator::store::generations::GenerationRow {
        let mut conn = self.core().pool.acquire().await.unwrap();
        cairn_state_coordinator::store::generations::generation_get(
            &mut conn,
            state_id.parse().unwrap(),
            generation,
        )
        .await
        .unwrap()
        .expect("generation row")
    }

    /// How many generations a state has.
    pub async fn generation_count(&self, state_id: &str) -> i64 {
        sqlx::query_scalar("SELECT count(*) FROM generations WHERE state_id = $1")
            .bind(state_id.parse::<Uuid>().unwrap())
            .fetch_one(&self.admin_pool().await)
            .await
            .unwrap()
    }

    /// Every object version in the coordinator's store (either kind), store-relative.
    pub async fn object_versions(&self) -> Vec<ObjectVersion> {
        self.core()
            .objects
            .list("")
            .await
            .expect("list the object store")
    }

    /// The version ids stored under exactly `key` (either store).
    pub async fn versions_of(&self, key: &str) -> Vec<String> {
        self.object_versions()
            .await
            .into_iter()
            .filter(|v| v.key == key)
            .map(|v| v.version_id)
            .collect()
    }

    /// The stored bytes of one object version (either store); `None` when it is gone.
    pub async fn object_bytes(&self, key: &str, version: &str) -> Option<Vec<u8>> {
        match self.core().objects.get(key, version).await {
            Ok(b) => Some(b.to_vec()),
            Err(ObjectError::NotFound { .. }) => None,
            Err(e) => panic!("read object {key} version {version}: {e}"),
        }
    }

    /// Everything the object store holds, raw: every version in the bucket (with its
    /// metadata), or every file under the file store's directory (temporary files too).
    pub async fn raw_objects(&self) -> Vec<(String, Vec<u8>)> {
        match &self.objects_dir {
            None => {
                let mut out = Vec::new();
                for (key, version) in self.bucket_versions().await {
                    let obj = self
                        .aws
                        .s3
                        .get_object()
                        .bucket(&self.aws.bucket)
                        .key(&key)
                        .version_id(&version)
                        .send()
                        .await
                        .expect("get object version");
                    let mut bytes = format!("{:?}\n", obj.metadata()).into_bytes();
                    bytes.extend_from_slice(&obj.body.collect().await.unwrap().into_bytes());
                    out.push((format!("{key} version {version}"), bytes));
                }
                out
            }
            Some(dir) => {
                let mut out = Vec::new();
                let mut pending = vec![dir.path().to_path_buf()];
                while let Some(d) = pending.pop() {
                    for entry in std::fs::read_dir(&d).unwrap() {
                        let path = entry.unwrap().path();
                        if path.is_dir() {
                            pending.push(path);
                        } else {
                            out.push((path.display().to_string(), std::fs::read(&path).unwrap()));
                        }
                    }
                }
                out.sort();
                out
            }
        }
    }

    /// The bucket key of a store-relative object key.
    pub fn bucket_key(&self, object_key: &str) -> String {
        format!("{OBJECT_PREFIX}/{object_key}")
    }

    /// Every (bucket key, version id) in the test bucket.
    pub async fn bucket_versions(&self) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let (mut key_marker, mut version_marker) = (None::<String>, None::<String>);
        loop {
            let page = self
                .aws
                .s3
                .list_object_versions()
                .bucket(&self.aws.bucket)
                .set_key_marker(key_marker.take())
                .set_version_id_marker(version_marker.take())
                .send()
                .await
                .unwrap();
            for v in page.versions() {
                out.push((
                    v.key().unwrap().to_owned(),
                    v.version_id().unwrap().to_owned(),
                ));
            }
            if page.is_truncated() != Some(true) {
                out.sort();
                return out;
            }
            key_marker = page.next_key_marker().map(str::to_owned);
            version_marker = page.next_version_id_marker().map(str::to_owned);
        }
    }

    /// Reads one object version straight from the bucket; `None` when S3 says it is gone.
    pub async fn bucket_get(&self, object_key: &str, version: &str) -> Option<Vec<u8>> {
        match self
            .aws
            .s3
            .get_object()
            .bucket(&self.aws.bucket)
            .key(self.bucket_key(object_key))
            .version_id(version)
            .send()
            .await
        {
            Ok(out) => Some(out.body.collect().await.unwrap().into_bytes().to_vec()),
            Err(e) => {
                let code = aws_sdk_s3::error::ProvideErrorMetadata::code(&e).map(str::to_owned);
                assert!(
                    matches!(code.as_deref(), Some("NoSuchKey" | "NoSuchVersion")),
                    "unexpected S3 error: {}",
                    aws_sdk_s3::error::DisplayErrorContext(e)
                );
                None
            }
        }
    }

    /// Puts a new version of an object straight into the bucket; returns its version id.
    pub async fn bucket_put(&self, object_key: &str, body: Vec<u8>) -> String {
        self.aws
            .s3
            .put_object()
            .bucket(&self.aws.bucket)
            .key(self.bucket_key(object_key))
            .body(body.into())
            .send()
            .await
            .unwrap()
            .version_id()
            .expect("versioned bucket")
            .to_owned()
    }

    /// Permanently deletes one object version from the bucket.
    pub async fn bucket_delete(&self, object_key: &str, version: &str) {
        self.aws
            .s3
            .delete_object()
            .bucket(&self.aws.bucket)
            .key(self.bucket_key(object_key))
            .version_id(version)
            .send()
            .await
            .unwrap();
    }

    /// Events of this test's tenant and `event_type` published on its events stream.
    pub async fn published_events(&self, event_type: &str) -> Vec<cairn_proto::events::Event> {
        use prost::Message;
        let ns = cairn_bus::Namespace::with_prefix(&self.nats.prefix).unwrap();
        let subject = ns
            .events_subject(&self.tenant.to_string(), "state", event_type)
            .unwrap();
        let mut stream = self
            .nats
            .jetstream
            .get_stream(ns.events_stream())
            .await
            .expect("events stream");
        let state = stream.info().await.expect("stream info").state.clone();
        let mut out = Vec::new();
        if state.messages == 0 {
            return out;
        }
        for seq in state.first_sequence..=state.last_sequence {
            let Ok(msg) = stream.get_raw_message(seq).await else {
                continue;
            };
            if msg.subject.as_str() == subject {
                out.push(cairn_proto::events::Event::decode(msg.payload).expect("event"));
            }
        }
        out
    }

    /// Polls the events stream until an event of `event_type` about `state_id` matching
    /// `pred` is published (deadline 15 s).
    pub async fn wait_for_event(
        &self,
        event_type: &str,
        state_id: &str,
        pred: impl Fn(&cairn_proto::events::Event) -> bool,
    ) -> cairn_proto::events::Event {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(15);
        loop {
            let found = self
                .published_events(event_type)
                .await
                .into_iter()
                .find(|e| e.aggregate_id == state_id && pred(e));
            if let Some(e) = found {
                return e;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no {event_type} event for state {state_id} was published within 15 s"
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }

    /// Every event in the outbox (published or not), in commit order.
    pub async fn outbox_events(&self) -> Vec<cairn_proto::events::Event> {
        use prost::Message;
        let rows: Vec<Vec<u8>> = sqlx::query_scalar("SELECT payload FROM outbox ORDER BY seq")
            .fetch_all(&self.admin_pool().await)
            .await
            .unwrap();
        rows.into_iter()
            .map(|p| cairn_proto::events::Event::decode(p.as_slice()).expect("event"))
            .collect()
    }
}

/// A key manager whose delegate the test swaps while the coordinator runs (e.g. from moto's
/// KMS to one that answers AccessDenied).
pub struct SwitchableKeyManager {
    inner: std::sync::RwLock<Arc<dyn cairn_storage::KeyManager>>,
}

impl SwitchableKeyManager {
    pub fn new(inner: Arc<dyn cairn_storage::KeyManager>) -> Arc<Self> {
        Arc::new(Self {
            inner: std::sync::RwLock::new(inner),
        })
    }

    pub fn swap(&self, next: Arc<dyn cairn_storage::KeyManager>) {
        *self.inner.write().unwrap() = next;
    }

    fn current(&self) -> Arc<dyn cairn_storage::KeyManager> {
        self.inner.read().unwrap().clone()
    }
}

impl cairn_storage::KeyManager for SwitchableKeyManager {
    fn generate_data_key<'a>(
        &'a self,
        ctx: &'a cairn_storage::EncryptionContext,
    ) -> cairn_storage::BoxFuture<'a, Result<cairn_storage::DataKey, cairn_storage::KeyError>> {
        let inner = self.current();
        Box::pin(async move { inner.generate_data_key(ctx).await })
    }

    fn unwrap_data_key<'a>(
        &'a self,
        key_id: &'a str,
        wrapped: &'a [u8],
        ctx: &'a cairn_storage::EncryptionContext,
    ) -> cairn_storage::BoxFuture<'a, Result<cairn_storage::SecretKey, cairn_storage::KeyError>>
    {
        let inner = self.current();
        Box::pin(async move { inner.unwrap_data_key(key_id, wrapped, ctx).await })
    }

    fn describe(&self) -> String {
        format!("switchable {}", self.current().describe())
    }
}

/// An HTTP server on 127.0.0.1 answering every request with `status` and a JSON `body`
/// (AWS JSON 1.1 errors such as `{"__type":"AccessDeniedException",...}`), for failures moto
/// cannot produce. Returns its base URL; it lives as long as the test's runtime.
pub async fn canned_json_server(status: u16, body: impl Into<String>) -> String {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let body: Arc<str> = Arc::from(body.into());
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            let body = body.clone();
            tokio::spawn(async move {
                // Read the whole request (head + content-length bytes), then answer and close.
                let mut seen: Vec<u8> = Vec::new();
                let mut chunk = [0u8; 8192];
                let mut wanted: Option<usize> = None;
                loop {
                    if let Some(total) = wanted
                        && seen.len() >= total
                    {
                        break;
                    }
                    match conn.read(&mut chunk).await {
                        Ok(0) | Err(_) => return,
                        Ok(n) => seen.extend_from_slice(&chunk[..n]),
                    }
                    if wanted.is_none()
                        && let Some(end) = seen.windows(4).position(|w| w == b"\r\n\r\n")
                    {
                        let head = String::from_utf8_lossy(&seen[..end]).to_ascii_lowercase();
                        let length = head
                            .split("\r\n")
                            .filter_map(|l| l.split_once(':'))
                            .find(|(name, _)| name.trim() == "content-length")
                            .and_then(|(_, v)| v.trim().parse::<usize>().ok())
                            .unwrap_or(0);
                        wanted = Some(end + 4 + length);
                    }
                }
                let reply = format!(
                    "HTTP/1.1 {status} Canned\r\nContent-Type: application/x-amz-json-1.1\r\nContent-Length: {}\r\nx-amzn-RequestId: canned\r\nConnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = conn.write_all(reply.as_bytes()).await;
                let _ = conn.shutdown().await;
            });
        }
    });
    url
}

/// A KMS key manager talking to a canned server that denies every call.
pub async fn access_denied_kms(key_id: &str) -> Arc<dyn cairn_storage::KeyManager> {
    canned_kms(400, "AccessDeniedException", key_id).await
}

/// A KMS key manager talking to a canned server that answers every call with `status` and
/// the AWS JSON error `error_type`.
pub async fn canned_kms(
    status: u16,
    error_type: &str,
    key_id: &str,
) -> Arc<dyn cairn_storage::KeyManager> {
    let body = format!(r#"{{"__type":"{error_type}","message":"canned by the test"}}"#);
    let url = canned_json_server(status, body).await;
    Arc::new(KmsKeyManager::with_config(
        &cairn_testkit::sdk_config_for(&url),
        key_id.to_owned(),
    ))
}
