-- States: one per resource, owned by one tenant + instance.
CREATE TABLE states (
    state_id           uuid PRIMARY KEY,
    tenant_id          uuid NOT NULL,
    instance_id        uuid NOT NULL,
    key                text NOT NULL,
    status             text NOT NULL DEFAULT 'healthy'
                       CHECK (status IN ('healthy', 'recovery_required')),
    fence_reason       text,
    fenced_at          timestamptz,
    current_generation bigint NOT NULL DEFAULT 0 CHECK (current_generation >= 0),
    created_at         timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT states_key_unique UNIQUE (key)
);
CREATE INDEX states_tenant_idx ON states (tenant_id, created_at, state_id);
CREATE INDEX states_fenced_idx ON states (tenant_id) WHERE status = 'recovery_required';
