-- A step's and a deployment's change events take their position at COMMIT, not at the
-- statement that made the change. Taking a position locks the deployment's row until the
-- transaction ends (0010, 0015); taken at the statement, the lock was held across every
-- round trip to the client that followed it, and in a burst of a deployment's work (ten
-- runs ending, their next runs requested, their log lines stored) every other transaction
-- of that deployment queued behind those round trips. Deferred, the lock is held only
-- while the transaction commits. Positions still commit in order (whoever holds the lock
-- commits before the next one takes it), and a transaction's events keep the order of its
-- statements: deferred events fire at commit in the order they were queued, so a step's
-- change and the deployment's status written after it in one transaction are seen in
-- that order (a watcher that stops at a final status has every step's final view first).
-- A new deployment's first event (position 1, its status) is still taken at its INSERT.

DROP TRIGGER deployment_events_step_insert ON steps;
DROP TRIGGER deployment_events_step_update ON steps;

CREATE CONSTRAINT TRIGGER deployment_events_step_insert AFTER INSERT ON steps
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW EXECUTE FUNCTION deployment_events_on_step();
CREATE CONSTRAINT TRIGGER deployment_events_step_update AFTER UPDATE ON steps
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (
        OLD.status IS DISTINCT FROM NEW.status
        OR OLD.reason IS DISTINCT FROM NEW.reason
        OR OLD.run_id IS DISTINCT FROM NEW.run_id
        OR OLD.tries IS DISTINCT FROM NEW.tries
        OR OLD.error_class IS DISTINCT FROM NEW.error_class
        OR OLD.plan_add IS DISTINCT FROM NEW.plan_add
        OR OLD.plan_change IS DISTINCT FROM NEW.plan_change
        OR OLD.plan_destroy IS DISTINCT FROM NEW.plan_destroy
        OR OLD.plan_replaced IS DISTINCT FROM NEW.plan_replaced
        OR OLD.plan_risk IS DISTINCT FROM NEW.plan_risk
        OR OLD.started_at IS DISTINCT FROM NEW.started_at
        OR OLD.finished_at IS DISTINCT FROM NEW.finished_at)
    EXECUTE FUNCTION deployment_events_on_step();

-- A status change: its position was `event_seq + 1` set by a BEFORE trigger in the same
-- UPDATE; now it is taken by the deferred event like a step's.
DROP TRIGGER deployment_events_update_before ON deployments;
DROP TRIGGER deployment_events_status ON deployments;
DROP FUNCTION deployment_events_on_update_before();

CREATE FUNCTION deployment_events_on_status_change() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO deployment_events (deployment_id, position, kind, status)
    VALUES (NEW.deployment_id, deployment_event_next(NEW.deployment_id), 'status', NEW.status);
    RETURN NULL;
END
$$;

CREATE CONSTRAINT TRIGGER deployment_events_status AFTER UPDATE ON deployments
    DEFERRABLE INITIALLY DEFERRED
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION deployment_events_on_status_change();
