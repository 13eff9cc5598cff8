-- GetRun of a read-only run (a drift scan, a preview) asks whether a state-changing run of
-- its state was registered or ran since: it reads the plan/apply/destroy runs of the state.
-- Drift registers a run per scan, so the read-only runs of a state keep growing; this index
-- holds only the state-changing ones, so that read stays proportional to the state's
-- deployments, not to its scans.
CREATE INDEX runs_state_writes_idx ON runs (state_id, created_at)
    WHERE kind IN ('plan', 'apply', 'destroy');
