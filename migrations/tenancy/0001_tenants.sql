-- Tenants, and the one-row guard that makes `cairn-tenancy bootstrap` run at most once.
CREATE TABLE tenants (
    tenant_id    uuid        PRIMARY KEY,
    slug         text        NOT NULL UNIQUE CHECK (slug ~ '^[a-z][a-z0-9-]{1,62}$'),
    display_name text        NOT NULL,
    created_at   timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE bootstrap (
    singleton    boolean     PRIMARY KEY DEFAULT true CHECK (singleton),
    tenant_id    uuid        NOT NULL REFERENCES tenants (tenant_id),
    done_at      timestamptz NOT NULL DEFAULT now()
);
