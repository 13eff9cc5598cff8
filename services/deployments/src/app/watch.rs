//! `WatchDeployment`: a deployment's events from a position on. The stream reads the
//! `deployment_events` table (catch-up), then waits for new rows: one PostgreSQL listener
//! per process ([`WatchHub`]) wakes the watchers of a deployment when its events commit,
//! with a slow poll as a safety net. It ends once the deployment is terminal and every
//! event up to then was sent, when the client goes away, or at shutdown.
//!
//! A listening connection only ever receives, so one gone silent (PostgreSQL's host lost
//! without a FIN or RST) would look like a quiet one until the kernel gave it up. The hub
//! checks it ([`Liveness`]): after a while without a message it notifies itself through
//! the pool, and a connection that does not deliver that within a bound is given up and
//! replaced (its watchers woken, as after any reconnection).
use std::sync::Arc;
use std::time::Duration;

use cairn_auth::{Principal, Role};
use cairn_contract::{DeploymentId, TenantId};
use cairn_service::access::require;
use sqlx::PgPool;
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;
use tracing::Instrument;
use uuid::Uuid;

use super::App;
use crate::domain::DeploymentStatus;
use crate::error::{Error, Result};
use crate::store::deployments as deployments_store;
use crate::store::events::{self, EventRow};

/// Events read per query.
const BATCH: i64 = 200;
/// Events buffered per watcher before it waits for its client.
const BUFFER: usize = 64;
/// How long a caught-up watcher waits without a notification before it looks again.
const SAFETY_POLL: Duration = Duration::from_secs(5);
/// Pause before the listener reconnects after PostgreSQL failed it.
const RECONNECT: Duration = Duration::from_secs(1);

/// Wakes the watchers of a deployment when its events commit (one LISTEN connection per
/// process); a nil id wakes everyone (the listener reconnected and may have missed some).
pub struct WatchHub {
    wake: broadcast::Sender<Uuid>,
    cancel: CancellationToken,
}

/// How the hub finds its listening connection gone silent: after `idle` without a message
/// it notifies itself through the pool (a heartbeat), and a connection that has delivered
/// nothing `probe` later is given up.
#[derive(Debug, Clone, Copy)]
pub struct Liveness {
    pub idle: Duration,
    pub probe: Duration,
}

impl Default for Liveness {
    fn default() -> Self {
        Self {
            idle: Duration::from_secs(10),
            probe: Duration::from_secs(5),
        }
    }
}

impl WatchHub {
    /// The hub and its listener task (run it until `cancel` fires; watchers end then too).
    pub fn new(
        pool: PgPool,
        cancel: CancellationToken,
    ) -> (Arc<WatchHub>, impl Future<Output = ()> + Send + 'static) {
        Self::with_liveness(pool, cancel, Liveness::default())
    }

    /// [`WatchHub::new`] with its own [`Liveness`] bounds.
    pub fn with_liveness(
        pool: PgPool,
        cancel: CancellationToken,
        liveness: Liveness,
    ) -> (Arc<WatchHub>, impl Future<Output = ()> + Send + 'static) {
        let (wake, _) = broadcast::channel(1024);
        let hub = Arc::new(WatchHub {
            wake: wake.clone(),
            cancel: cancel.clone(),
        });
        (hub, listen(pool, wake, cancel, liveness))
    }

    /// A receiver of the hub's wake-ups: a deployment id when its events commit, nil when
    /// everyone must look (the listener (re)connected).
    pub fn subscribe(&self) -> broadcast::Receiver<Uuid> {
        self.wake.subscribe()
    }
}

async fn listen(
    pool: PgPool,
    wake: broadcast::Sender<Uuid>,
    cancel: CancellationToken,
    liveness: Liveness,
) {
    while !cancel.is_cancelled() {
        let connected =
            tokio::time::timeout(cairn_db::BACKGROUND_LIMIT, events::events_listen(&pool))
                .await
                .unwrap_or_else(|_| Err(cairn_db::timed_out(cairn_db::BACKGROUND_LIMIT)));
        let mut listener = match connected {
            Ok(l) => l,
            Err(err) => {
                tracing::warn!(error = %cairn_bus::Chain(&err), "cannot listen for deployment events; retrying");
                tokio::select! {
                    () = cancel.cancelled() => return,
                    () = tokio::time::sleep(RECONNECT) => continue,
                }
            }
        };
        // Whatever committed while no one listened.
        let _ = wake.send(Uuid::nil());
        loop {
            // The receive is never dropped half-way (only a connection given up, or shutdown,
            // loses it): quiet for `idle`, the hub sends its heartbeat and waits on.
            let next = tokio::select! {
                () = cancel.cancelled() => return,
                next = async {
                    let recv = listener.try_recv();
                    tokio::pin!(recv);
                    if let Ok(next) = tokio::time::timeout(liveness.idle, &mut recv).await {
                        return Some(next);
                    }
                    tokio::spawn(send_heartbeat(pool.clone(), liveness.probe));
                    tokio::time::timeout(liveness.probe, &mut recv).await.ok()
                } => next,
            };
            match next {
                Some(Ok(Some(n))) if n.channel() == events::HEARTBEAT_CHANNEL => {}
                Some(Ok(Some(n))) => {
                    let id = Uuid::parse_str(n.payload()).unwrap_or(Uuid::nil());
                    let _ = wake.send(id);
                }
                // The connection was lost; the listener reconnects on the next call.
                Some(Ok(None)) => {
                    let _ = wake.send(Uuid::nil());
                }
                Some(Err(err)) => {
                    tracing::warn!(error = %cairn_bus::Chain(&err), "deployment event listener failed; reconnecting");
                    break;
                }
                None => {
                    metrics::counter!(crate::metrics::EVENT_LISTENER_SILENT).increment(1);
                    tracing::warn!(
                        idle = ?liveness.idle,
                        probe = ?liveness.probe,
                        "deployment event listener delivered not even its own heartbeat; giving its connection up"
                    );
                    break;
                }
            }
        }
        tokio::select! {
            () = cancel.cancelled() => return,
            () = tokio::time::sleep(RECONNECT) => {}
        }
    }
}

/// The hub's heartbeat, given up (its connection closed) after `limit`: a lost heartbeat
/// only makes the hub replace its listening connection.
async fn send_heartbeat(pool: PgPool, limit: Duration) {
    let sent: sqlx::Result<()> =
        cairn_db::bounded!(&pool, within limit, |conn| { events::heartbeat(conn).await });
    if let Err(err) = sent {
        tracing::debug!(error = %cairn_bus::Chain(&err), "deployment events heartbeat not sent");
    }
}

/// One event of a deployment as the store holds it.
pub type WatchEvent = EventRow;

impl App {
    /// The deployment's events after position `after`, as a channel the caller drains;
    /// another tenant's deployment is NOT_FOUND.
    #[tracing::instrument(skip_all, fields(tenant_id = %tenant, deployment_id = %deployment_id, after))]
    pub async fn watch_deployment(
        &self,
        who: &Principal,
        tenant: TenantId,
        deployment_id: DeploymentId,
        after: u64,
    ) -> Result<mpsc::Receiver<Result<WatchEvent>>> {
        let what = format!("deployment {deployment_id}");
        require(who, tenant, Role::Viewer, &what)?;
        let mut conn = self.pool.acquire().await?;
        deployments_store::deployment_get(&mut conn, tenant.uuid(), deployment_id.uuid())
            .await?
            .ok_or_else(|| Error::not_found(what))?;
        drop(conn);
        let after = i64::try_from(after)
            .map_err(|_| Error::invalid_argument(format!("after {after} is not a position")))?;
        let (tx, rx) = mpsc::channel(BUFFER);
        let pool = self.pool.clone();
        let wake = self.watch.wake.subscribe();
        let cancel = self.watch.cancel.clone();
        let id = deployment_id.uuid();
        tokio::spawn(
            async move {
                if let Err(err) = stream(&pool, id, after, wake, &tx, &cancel).await {
                    tracing::warn!(error = %cairn_bus::Chain(&err), "watch ended by an error");
                    let _ = tx.send(Err(err)).await;
                }
            }
            .instrument(tracing::Span::current()),
        );
        Ok(rx)
    }
}

/// Sends the events of `id` after `after` to `tx` until the deployment is terminal and all
/// was sent, or the receiver went away, or shutdown.
async fn stream(
    pool: &PgPool,
    id: Uuid,
    mut after: i64,
    mut wake: broadcast::Receiver<Uuid>,
    tx: &mpsc::Sender<Result<WatchEvent>>,
    cancel: &CancellationToken,
) -> Result<()> {
    loop {
        let mut conn = pool.acquire().await?;
        // The status first: once it is terminal, its event (written in the same
        // transaction) and every earlier one are visible to the read below.
        let Some(status) = events::deployment_status(&mut conn, id).await? else {
            return Ok(()); // deleted (its instance was)
        };
        let batch = events::events_after(&mut conn, id, after, BATCH).await?;
        drop(conn);
        let full = i64::try_from(batch.len()).unwrap_or(i64::MAX) >= BATCH;
        for event in batch {
            after = event.position;
            if tx.send(Ok(event)).await.is_err() {
                return Ok(());
            }
        }
        if full {
            continue;
        }
        let terminal = DeploymentStatus::parse(&status)
            .map(|s| !s.is_active())
            .unwrap_or(false);
        if terminal {
            return Ok(());
        }
        // Caught up: wait for this deployment's next commit.
        let deadline = tokio::time::sleep(SAFETY_POLL);
        tokio::pin!(deadline);
        loop {
            tokio::select! {
                () = cancel.cancelled() => return Ok(()),
                () = tx.closed() => return Ok(()),
                () = &mut deadline => break,
                woke = wake.recv() => match woke {
                    Ok(w) if w == id || w.is_nil() => break,
                    Ok(_) => {}
                    Err(broadcast::error::RecvError::Lagged(_)) => break,
                    Err(broadcast::error::RecvError::Closed) => return Ok(()),
                },
            }
        }
    }
}
