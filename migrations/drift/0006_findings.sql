-- Findings: a resource's drift as one scan found it (addresses, actions, attribute paths;
-- never a value), open until a deployment or a clean scan resolves it. A new finding is
-- written only when the fingerprint differs from the resource's last one.
CREATE TABLE findings (
    finding_id  uuid        PRIMARY KEY,
    tenant_id   uuid        NOT NULL,
    instance_id uuid        NOT NULL,
    resource    text        NOT NULL,
    scan_id     uuid        NOT NULL,
    fingerprint text        NOT NULL CHECK (fingerprint <> ''),
    summary     text        NOT NULL,
    changes     jsonb       NOT NULL,
    status      text        NOT NULL CHECK (status IN ('open', 'resolved')),
    detected_at timestamptz NOT NULL DEFAULT now(),
    resolved_at timestamptz
);

CREATE UNIQUE INDEX findings_one_open_idx ON findings (instance_id, resource) WHERE status = 'open';
CREATE INDEX findings_tenant_idx ON findings (tenant_id, finding_id);
CREATE INDEX findings_instance_idx ON findings (instance_id, finding_id);
