-- Deployments and their steps, all created in the request's transaction so the whole plan
-- is visible at once.
CREATE TABLE deployments (
    deployment_id        uuid        PRIMARY KEY,
    tenant_id            uuid        NOT NULL,
    instance_id          uuid        NOT NULL REFERENCES instances (instance_id) ON DELETE CASCADE,
    kind                 text        NOT NULL CHECK (kind IN ('deploy', 'destroy', 'preview')),
    status               text        NOT NULL CHECK (status IN ('queued', 'running',
        'awaiting_approval', 'succeeded', 'failed', 'cancelled', 'rejected', 'expired')),
    requested_by         text        NOT NULL,
    -- What it converges, fixed at the request.
    instance_name        text        NOT NULL,
    target_id            uuid        NOT NULL,
    environment          text        NOT NULL,
    template_id          uuid        NOT NULL,
    template_version     integer     NOT NULL,
    parameters           jsonb       NOT NULL CHECK (jsonb_typeof(parameters) = 'object'),
    snapshot_id          uuid,
    previous_snapshot_id uuid,
    -- The instance's status before the request took it (restored on cancel).
    instance_status_before text      NOT NULL,
    plan_set_hash        text        NOT NULL DEFAULT '',
    summary              text        NOT NULL DEFAULT '',
    idempotency_key      text        CHECK (idempotency_key <> ''),
    created_at           timestamptz NOT NULL DEFAULT now(),
    updated_at           timestamptz NOT NULL DEFAULT now(),
    finished_at          timestamptz,
    -- The same key per instance names the same deployment.
    UNIQUE (instance_id, idempotency_key)
);

-- A second guard next to the instance's compare-and-set: one active (non-preview)
-- deployment per instance.
CREATE UNIQUE INDEX deployments_one_active_idx ON deployments (instance_id)
    WHERE kind <> 'preview' AND status IN ('queued', 'running', 'awaiting_approval');
CREATE INDEX deployments_tenant_idx ON deployments (tenant_id, deployment_id);
CREATE INDEX deployments_instance_idx ON deployments (instance_id, deployment_id);

CREATE TABLE steps (
    step_id        uuid        PRIMARY KEY,
    deployment_id  uuid        NOT NULL REFERENCES deployments (deployment_id) ON DELETE CASCADE,
    position       integer     NOT NULL,
    kind           text        NOT NULL CHECK (kind IN
        ('resolve', 'plan', 'probe', 'approval', 'apply', 'destroy', 'verify')),
    resource       text        NOT NULL DEFAULT '',
    depends_on     text[]      NOT NULL DEFAULT '{}',
    status         text        NOT NULL CHECK (status IN
        ('pending', 'running', 'succeeded', 'failed', 'skipped', 'cancelled')),
    reason         text        NOT NULL DEFAULT '',
    run_id         uuid,
    tries          integer     NOT NULL DEFAULT 0,
    error_class    text        NOT NULL DEFAULT '',
    plan_add       integer,
    plan_change    integer,
    plan_destroy   integer,
    plan_replaced  text[],
    plan_risk      text,
    started_at     timestamptz,
    finished_at    timestamptz,
    UNIQUE (deployment_id, position),
    -- A skipped, failed or cancelled step always says why.
    CHECK (status NOT IN ('skipped', 'failed', 'cancelled') OR reason <> '')
);

CREATE TABLE approvals (
    deployment_id  uuid        NOT NULL REFERENCES deployments (deployment_id) ON DELETE CASCADE,
    seq            integer     NOT NULL,
    decision       text        NOT NULL CHECK (decision IN ('approved', 'rejected')),
    decided_by     text        NOT NULL,
    plan_set_hash  text        NOT NULL,
    comment        text        NOT NULL DEFAULT '',
    decided_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (deployment_id, seq)
);
