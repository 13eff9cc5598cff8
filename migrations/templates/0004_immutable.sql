-- Versions and snapshots never change once written: UPDATE, DELETE and TRUNCATE are refused
-- for every role, the runtime role additionally holds only INSERT and SELECT on them.
CREATE FUNCTION templates_refuse_change() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    RAISE EXCEPTION '% is immutable: % refused', TG_TABLE_NAME, TG_OP
        USING ERRCODE = 'insufficient_privilege';
END;
$$;

CREATE TRIGGER template_versions_immutable
    BEFORE UPDATE OR DELETE ON template_versions
    FOR EACH ROW EXECUTE FUNCTION templates_refuse_change();
CREATE TRIGGER template_versions_no_truncate
    BEFORE TRUNCATE ON template_versions
    FOR EACH STATEMENT EXECUTE FUNCTION templates_refuse_change();
CREATE TRIGGER snapshots_immutable
    BEFORE UPDATE OR DELETE ON snapshots
    FOR EACH ROW EXECUTE FUNCTION templates_refuse_change();
CREATE TRIGGER snapshots_no_truncate
    BEFORE TRUNCATE ON snapshots
    FOR EACH STATEMENT EXECUTE FUNCTION templates_refuse_change();
