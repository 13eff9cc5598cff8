-- Immutable, content-addressed versions: publishing the same document twice finds the
-- existing row through the (template_id, content_hash) constraint.
CREATE TABLE template_versions (
    template_id   uuid NOT NULL REFERENCES templates (template_id),
    tenant_id     uuid NOT NULL,
    number        integer NOT NULL CHECK (number > 0),
    content_hash  text NOT NULL CHECK (content_hash ~ '^[0-9a-f]{64}$'),
    document      text NOT NULL,
    created_at    timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (template_id, number),
    UNIQUE (template_id, content_hash)
);
