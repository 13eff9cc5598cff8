-- Service accounts and API tokens. A token belongs either to a member of a tenant or to a
-- service account; only the SHA-256 of its secret is stored.
CREATE TABLE service_accounts (
    service_account_id uuid        PRIMARY KEY,
    name               text        NOT NULL UNIQUE CHECK (name ~ '^[a-z][a-z0-9-]{0,62}$'),
    created_at         timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE api_tokens (
    token_id           uuid        PRIMARY KEY,
    secret_sha256      bytea       NOT NULL CHECK (length(secret_sha256) = 32),
    name               text        NOT NULL,
    tenant_id          uuid        REFERENCES tenants (tenant_id),
    user_id            uuid        REFERENCES users (user_id),
    service_account_id uuid        REFERENCES service_accounts (service_account_id),
    role               text        NOT NULL CHECK (role IN ('viewer', 'operator', 'approver', 'admin', 'owner', 'service')),
    scopes             text[]      NOT NULL DEFAULT '{}',
    created_at         timestamptz NOT NULL DEFAULT now(),
    expires_at         timestamptz,
    revoked_at         timestamptz,
    last_used_at       timestamptz,
    CHECK (
        (user_id IS NOT NULL AND tenant_id IS NOT NULL AND service_account_id IS NULL AND role <> 'service')
        OR (service_account_id IS NOT NULL AND user_id IS NULL AND tenant_id IS NULL AND role = 'service')
    )
);

CREATE INDEX api_tokens_tenant_idx ON api_tokens (tenant_id, token_id);
