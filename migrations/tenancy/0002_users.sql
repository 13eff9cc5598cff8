-- Users (one per email, across tenants) and their memberships with a role per tenant.
CREATE TABLE users (
    user_id        uuid        PRIMARY KEY,
    email          text        NOT NULL UNIQUE CHECK (email = lower(email)),
    display_name   text        NOT NULL,
    -- argon2id PHC string; NULL until the user sets a password.
    password_hash  text,
    platform_admin boolean     NOT NULL DEFAULT false,
    created_at     timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE memberships (
    tenant_id  uuid        NOT NULL REFERENCES tenants (tenant_id),
    user_id    uuid        NOT NULL REFERENCES users (user_id),
    role       text        NOT NULL CHECK (role IN ('viewer', 'operator', 'approver', 'admin', 'owner')),
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (tenant_id, user_id)
);

CREATE INDEX memberships_user_idx ON memberships (user_id);
