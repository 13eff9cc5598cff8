-- Instances: a template (at a version) with parameters, deployed to one target in one
-- environment. `active_deployment_id` is the compare-and-set guard: at most one active
-- deployment per instance; `revision` grows with every change, so a request that read the
-- instance earlier changes it only if nothing else did meanwhile.
CREATE TABLE instances (
    instance_id              uuid        PRIMARY KEY,
    tenant_id                uuid        NOT NULL,
    name                     text        NOT NULL CHECK (name ~ '^[a-z][a-z0-9-]{0,62}$'),
    template_id              uuid        NOT NULL,
    template_version         integer     NOT NULL CHECK (template_version > 0),
    target_id                uuid        NOT NULL,
    environment              text        NOT NULL CHECK (environment <> ''),
    parameters               jsonb       NOT NULL CHECK (jsonb_typeof(parameters) = 'object'),
    status                   text        NOT NULL CHECK (status IN
        ('pending', 'deploying', 'active', 'failed', 'destroying', 'destroyed')),
    active_deployment_id     uuid,
    last_applied_snapshot_id uuid,
    revision                 bigint      NOT NULL DEFAULT 1,
    created_at               timestamptz NOT NULL DEFAULT now(),
    updated_at               timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, name),
    -- Deploying and destroying are exactly the states with an active deployment.
    CHECK ((active_deployment_id IS NOT NULL) = (status IN ('deploying', 'destroying')))
);

CREATE INDEX instances_tenant_idx ON instances (tenant_id, instance_id);

-- Per resource of an instance: what was last applied (written by the workflow).
CREATE TABLE instance_resources (
    instance_id         uuid        NOT NULL REFERENCES instances (instance_id) ON DELETE CASCADE,
    name                text        NOT NULL,
    module              text        NOT NULL,
    state_id            uuid,
    status              text        NOT NULL CHECK (status IN ('pending', 'applied', 'failed', 'destroyed')),
    last_generation     bigint      NOT NULL DEFAULT 0,
    last_applied_run_id uuid,
    drift_status        text        NOT NULL DEFAULT 'unknown'
        CHECK (drift_status IN ('unknown', 'in_sync', 'drift_detected', 'check_failed')),
    -- Dependency order in the snapshot it was last applied from.
    position            integer     NOT NULL,
    updated_at          timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (instance_id, name)
);
