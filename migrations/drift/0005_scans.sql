-- One row per scan: the coordinator's run id, the slot it was due in (one scan per
-- resource and slot, whichever replica claims it), the instance's deployment counter and
-- the applied run at claim time (a result that no longer matches them is discarded).
CREATE TABLE scans (
    scan_id        uuid        PRIMARY KEY,
    resource_id    uuid        NOT NULL,
    tenant_id      uuid        NOT NULL,
    instance_id    uuid        NOT NULL,
    target_id      text        NOT NULL,
    applied_run_id uuid        NOT NULL,
    slot_at        timestamptz NOT NULL,
    deployments    bigint      NOT NULL,
    replica        text        NOT NULL,
    status         text        NOT NULL
                   CHECK (status IN ('claimed', 'requested', 'succeeded', 'failed', 'discarded', 'expired')),
    error_class    text        NOT NULL DEFAULT '',
    message        text        NOT NULL DEFAULT '',
    created_at     timestamptz NOT NULL DEFAULT now(),
    requested_at   timestamptz,
    finished_at    timestamptz,
    UNIQUE (resource_id, slot_at)
);

CREATE INDEX scans_open_idx ON scans (created_at) WHERE status IN ('claimed', 'requested');

-- Scans in flight per target (compare-and-set below the bound, shared by the replicas).
CREATE TABLE target_scans (
    target_id text    PRIMARY KEY,
    in_flight integer NOT NULL DEFAULT 0 CHECK (in_flight >= 0)
);
