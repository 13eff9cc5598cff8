-- Instances as drift sees them, from the events: how many deployments were requested (a
-- scan records the count; a result that comes back after it moved is discarded), which
-- deployments are in progress (scans skip the instance meanwhile), and its ignore rules.
CREATE TABLE instances (
    instance_id  uuid        PRIMARY KEY,
    tenant_id    uuid        NOT NULL,
    deployments  bigint      NOT NULL DEFAULT 0 CHECK (deployments >= 0),
    ignore_rules text[]      NOT NULL DEFAULT '{}',
    updated_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE deployments (
    deployment_id uuid        PRIMARY KEY,
    instance_id   uuid        NOT NULL,
    requested_at  timestamptz,
    ended_at      timestamptz
);

-- "Is a deployment of this instance in progress?"
CREATE INDEX deployments_open_idx ON deployments (instance_id) WHERE ended_at IS NULL;
