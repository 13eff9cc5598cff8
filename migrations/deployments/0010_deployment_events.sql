-- What WatchDeployment streams: every change of a deployment's status and of its steps'
-- views, and (written by the log ingestion) every log line of its steps, each at a position
-- that is gapless per deployment. The rows are written by TRIGGERS, so no writer of
-- `deployments` or `steps` can skip them. Every writer takes its position from the
-- deployment's counter `event_seq` in its own transaction (an UPDATE of the deployment
-- row, whose row lock serialises the writers of one deployment), so positions commit in
-- order and a reader that saw position p has already seen every position below it.
ALTER TABLE deployments ADD COLUMN event_seq bigint NOT NULL DEFAULT 0;

CREATE TABLE deployment_events (
    deployment_id  uuid        NOT NULL REFERENCES deployments (deployment_id) ON DELETE CASCADE,
    position       bigint      NOT NULL CHECK (position > 0),
    at             timestamptz NOT NULL DEFAULT clock_timestamp(),
    kind           text        NOT NULL CHECK (kind IN ('status', 'step', 'log')),
    -- status: the deployment's new status.
    status         text,
    -- step: the step's view after the change (its kind, resource and dependencies never
    -- change and are read from `steps`); log: the step the line belongs to.
    step_id        uuid,
    step_status    text,
    reason         text,
    -- step: the step's run; log: the line's run.
    run_id         uuid,
    tries          integer,
    error_class    text,
    plan_add       integer,
    plan_change    integer,
    plan_destroy   integer,
    plan_replaced  text[],
    plan_risk      text,
    started_at     timestamptz,
    finished_at    timestamptz,
    -- log: which line (the text is in `step_logs`, bounded per step).
    attempt        integer,
    seq            bigint,
    PRIMARY KEY (deployment_id, position),
    CHECK (kind <> 'status' OR status IS NOT NULL),
    CHECK (kind <> 'step' OR (step_id IS NOT NULL AND step_status IS NOT NULL)),
    CHECK (kind <> 'log' OR (step_id IS NOT NULL AND run_id IS NOT NULL
                             AND attempt IS NOT NULL AND seq IS NOT NULL))
);

-- A log line is an event once: redelivered lines find their row here (kept after the
-- line's text was dropped by the per-step bound).
CREATE UNIQUE INDEX deployment_events_log_line_idx ON deployment_events (run_id, attempt, seq)
    WHERE kind = 'log';

-- The functions run with the schema they were created in (whoever calls them).

-- The next position of a deployment (takes its row lock until the transaction ends).
CREATE FUNCTION deployment_event_next(d uuid) RETURNS bigint
LANGUAGE sql SET search_path FROM CURRENT AS $$
    UPDATE deployments SET event_seq = event_seq + 1 WHERE deployment_id = d RETURNING event_seq
$$;

-- A new deployment starts at position 1 with its status.
CREATE FUNCTION deployment_events_on_insert_before() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    NEW.event_seq := 1;
    RETURN NEW;
END
$$;

-- A status change takes the next position in the same UPDATE (the row is already locked).
CREATE FUNCTION deployment_events_on_update_before() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    IF NEW.status IS DISTINCT FROM OLD.status THEN
        NEW.event_seq := OLD.event_seq + 1;
    END IF;
    RETURN NEW;
END
$$;

CREATE FUNCTION deployment_events_on_status() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO deployment_events (deployment_id, position, kind, status)
    VALUES (NEW.deployment_id, NEW.event_seq, 'status', NEW.status);
    RETURN NULL;
END
$$;

CREATE TRIGGER deployment_events_insert_before BEFORE INSERT ON deployments
    FOR EACH ROW EXECUTE FUNCTION deployment_events_on_insert_before();
CREATE TRIGGER deployment_events_update_before BEFORE UPDATE ON deployments
    FOR EACH ROW EXECUTE FUNCTION deployment_events_on_update_before();
CREATE TRIGGER deployment_events_insert AFTER INSERT ON deployments
    FOR EACH ROW EXECUTE FUNCTION deployment_events_on_status();
CREATE TRIGGER deployment_events_status AFTER UPDATE ON deployments
    FOR EACH ROW WHEN (OLD.status IS DISTINCT FROM NEW.status)
    EXECUTE FUNCTION deployment_events_on_status();

-- A step's new view: on insert, and on every update that changes a column of its view
-- (the columns of 0003; columns added later are not part of the view).
CREATE FUNCTION deployment_events_on_step() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO deployment_events (deployment_id, position, kind, step_id, step_status, reason,
        run_id, tries, error_class, plan_add, plan_change, plan_destroy, plan_replaced,
        plan_risk, started_at, finished_at)
    VALUES (NEW.deployment_id, deployment_event_next(NEW.deployment_id), 'step', NEW.step_id,
        NEW.status, NEW.reason, NEW.run_id, NEW.tries, NEW.error_class, NEW.plan_add,
        NEW.plan_change, NEW.plan_destroy, NEW.plan_replaced, NEW.plan_risk, NEW.started_at,
        NEW.finished_at);
    RETURN NULL;
END
$$;

CREATE TRIGGER deployment_events_step_insert AFTER INSERT ON steps
    FOR EACH ROW EXECUTE FUNCTION deployment_events_on_step();
CREATE TRIGGER deployment_events_step_update AFTER UPDATE ON steps
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

-- Watchers wait on this channel (payload: the deployment id); NOTIFY is sent at commit, and
-- the same payload twice in one transaction is sent once.
CREATE FUNCTION deployment_events_notify() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    PERFORM pg_notify('cairn_deployment_events', NEW.deployment_id::text);
    RETURN NULL;
END
$$;

CREATE TRIGGER deployment_events_notify AFTER INSERT ON deployment_events
    FOR EACH ROW EXECUTE FUNCTION deployment_events_notify();
