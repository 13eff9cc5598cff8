-- The append-only audit log. The runtime role gets INSERT and SELECT only (see
-- `append_only_tables` in the server); these triggers reject UPDATE, DELETE and TRUNCATE for
-- every role, the owner included.
CREATE TABLE audit_log (
    seq         bigserial   PRIMARY KEY,
    entry_id    uuid        NOT NULL UNIQUE,
    tenant_id   uuid,
    actor       text        NOT NULL,
    action      text        NOT NULL,
    object_type text        NOT NULL,
    object_id   text        NOT NULL,
    source      text        NOT NULL CHECK (source IN ('tenancy', 'events')),
    detail      jsonb       NOT NULL DEFAULT '{}',
    occurred_at timestamptz NOT NULL,
    recorded_at timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX audit_log_tenant_idx ON audit_log (tenant_id, seq);
CREATE INDEX audit_log_object_idx ON audit_log (object_type, object_id);
CREATE INDEX audit_log_actor_idx ON audit_log (actor);

CREATE FUNCTION audit_log_reject_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION 'audit_log is append-only: % is not allowed', TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;

CREATE TRIGGER audit_log_no_update_delete
    BEFORE UPDATE OR DELETE ON audit_log
    FOR EACH ROW EXECUTE FUNCTION audit_log_reject_change();

CREATE TRIGGER audit_log_no_truncate
    BEFORE TRUNCATE ON audit_log
    FOR EACH STATEMENT EXECUTE FUNCTION audit_log_reject_change();
