-- Why an attempt was revoked: 'newer-attempt' (AdmitRun of the next attempt) or 'recovery'
-- (an admin recovered its state: every live attempt of the state is revoked and its lock
-- dropped in the transaction that clears the fence). NULL while not revoked, and for
-- attempts revoked before this column existed (all by a newer attempt).
ALTER TABLE attempts ADD COLUMN revoked_by text
    CHECK (revoked_by IN ('newer-attempt', 'recovery'));
-- Set when an attempt finished although its lease had expired or a recovery had revoked it
-- (no newer attempt existed): the state may be incomplete. NULL for a normal finish.
ALTER TABLE attempts ADD COLUMN incomplete_reason text;
-- Bumped by every switch of after-restore mode: VerifyAll ends the mode only when no switch
-- happened since the pass began (compare-and-set on the epoch it read at the start).
ALTER TABLE coordinator_flags ADD COLUMN epoch bigint NOT NULL DEFAULT 0;
