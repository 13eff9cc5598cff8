-- Templates: one per (tenant, name).
CREATE TABLE templates (
    template_id  uuid PRIMARY KEY,
    tenant_id    uuid NOT NULL,
    name         text NOT NULL,
    description  text NOT NULL DEFAULT '',
    created_at   timestamptz NOT NULL DEFAULT now(),
    UNIQUE (tenant_id, name)
);
CREATE INDEX templates_tenant ON templates (tenant_id, template_id);
