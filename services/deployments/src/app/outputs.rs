//! The instance's outputs as GetInstance shows them: the declarations of its last applied
//! snapshot (from templates), the values from the coordinator's `GetOutputs` of each
//! referenced resource's state, sensitive ones withheld.
use std::collections::{BTreeMap, BTreeSet};

use super::App;
use super::instances::InstanceView;
use crate::domain::outputs::{OutputView, StateOutputs, instance_outputs};
use crate::error::Result;

impl App {
    /// The outputs of `view`; none before its first deployment and once destroyed (no
    /// snapshot is applied then).
    #[tracing::instrument(skip_all, fields(instance_id = %view.row.instance_id))]
    pub(crate) async fn instance_outputs(&self, view: &InstanceView) -> Result<Vec<OutputView>> {
        let Some(snapshot_id) = view.row.last_applied_snapshot_id else {
            return Ok(Vec::new());
        };
        let snapshot = self.peers.snapshot_document(snapshot_id).await?;
        let referenced: BTreeSet<&str> = snapshot
            .outputs
            .iter()
            .map(|o| o.resource.as_str())
            .collect();
        let mut states = BTreeMap::new();
        for name in referenced {
            let state = view
                .resources
                .iter()
                .find(|r| r.name == name)
                .and_then(|r| r.state_id);
            let outputs = match state {
                Some(id) => match self.coord.state_outputs(id).await? {
                    Some(outputs) => StateOutputs::Read(outputs),
                    None => StateOutputs::NoState,
                },
                None => StateOutputs::NoState,
            };
            states.insert(name.to_owned(), outputs);
        }
        Ok(instance_outputs(&snapshot.outputs, &states))
    }
}
