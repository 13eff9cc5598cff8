-- Targets: where a tenant deploys. Only the *name* of a credential reference is stored.
CREATE TABLE targets (
    target_id                  uuid        PRIMARY KEY,
    tenant_id                  uuid        NOT NULL REFERENCES tenants (tenant_id),
    name                       text        NOT NULL CHECK (name ~ '^[a-z0-9][a-z0-9-]{0,62}$'),
    provider_kind              text        NOT NULL CHECK (provider_kind IN ('local', 'aws')),
    local_base_dir             text,
    aws_region                 text,
    aws_role_arn               text,
    credential_ref             text        NOT NULL,
    max_concurrent_deployments integer     NOT NULL CHECK (max_concurrent_deployments > 0),
    enabled                    boolean     NOT NULL,
    created_at                 timestamptz NOT NULL DEFAULT now(),
    updated_at                 timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, name),
    CHECK (
        (provider_kind = 'local' AND local_base_dir IS NOT NULL AND aws_region IS NULL AND aws_role_arn IS NULL)
        OR (provider_kind = 'aws' AND local_base_dir IS NULL AND aws_region IS NOT NULL AND aws_role_arn IS NOT NULL)
    )
);
