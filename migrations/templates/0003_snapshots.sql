-- Immutable ResolvedInfrastructure snapshots; an identical resolve finds the existing row
-- through the (tenant_id, hash) constraint.
CREATE TABLE snapshots (
    snapshot_id       uuid PRIMARY KEY,
    tenant_id         uuid NOT NULL,
    template_id       uuid NOT NULL,
    template_number   integer NOT NULL,
    instance_id       uuid NOT NULL,
    environment       text NOT NULL,
    hash              text NOT NULL CHECK (hash ~ '^[0-9a-f]{64}$'),
    document          text NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now(),
    FOREIGN KEY (template_id, template_number) REFERENCES template_versions (template_id, number),
    UNIQUE (tenant_id, hash)
);
CREATE INDEX snapshots_instance ON snapshots (tenant_id, instance_id, created_at);
