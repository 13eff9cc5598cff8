-- Drift status per resource, from the drift service's instance.drift_detected|drift_resolved
-- events (and reset by the workflow when it applies or destroys the resource).
-- `drift_as_of` is the time of the newest fact the status reflects: the event's occurred_at,
-- or the apply/destroy that wrote it. An event applies only when it is newer (guarded in the
-- UPDATE), so a redelivered, reordered or stale event never regresses the status.
ALTER TABLE instance_resources ADD COLUMN drift_as_of timestamptz;
