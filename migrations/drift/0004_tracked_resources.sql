-- Every applied resource (from resource.applied / resource.destroyed): the run whose
-- config a scan plans again, when its next scan is due (its own phase in the interval), the
-- scan in flight and its drift status.
CREATE TABLE tracked_resources (
    resource_id    uuid        PRIMARY KEY,
    tenant_id      uuid        NOT NULL,
    instance_id    uuid        NOT NULL,
    resource       text        NOT NULL CHECK (resource <> ''),
    state_id       uuid        NOT NULL,
    applied_run_id uuid        NOT NULL,
    target_id      text        NOT NULL CHECK (target_id <> ''),
    environment    text        NOT NULL,
    -- Offset of its scans in the interval (a hash of resource_id), in milliseconds modulo
    -- the interval.
    phase          bigint      NOT NULL CHECK (phase >= 0),
    next_due_at    timestamptz NOT NULL,
    -- The scan in flight (claimed or requested), if any.
    scan_id        uuid,
    status         text        NOT NULL DEFAULT 'unknown'
                   CHECK (status IN ('unknown', 'in_sync', 'drift_detected', 'check_failed')),
    error_class    text        NOT NULL DEFAULT '',
    message        text        NOT NULL DEFAULT '',
    -- Of the masked findings of the last scan that found drift ('' when in sync).
    fingerprint    text        NOT NULL DEFAULT '',
    finding_id     uuid,
    last_scan_at   timestamptz,
    applied_at     timestamptz NOT NULL DEFAULT now(),
    UNIQUE (instance_id, resource)
);

-- The scheduler reads only what is due: O(due) per tick, never the whole table.
CREATE INDEX tracked_resources_due_idx ON tracked_resources (next_due_at) WHERE scan_id IS NULL;
CREATE INDEX tracked_resources_tenant_idx ON tracked_resources (tenant_id, instance_id);
