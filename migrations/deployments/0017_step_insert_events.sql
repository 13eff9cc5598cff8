-- A new deployment's steps take their event positions together, at their INSERT.
--
-- Steps are inserted once, by the request's transaction, in one statement right after the
-- deployment itself (whose first event, position 1, is taken at its INSERT). The row-level
-- deferred trigger (0016) gave each step its event at COMMIT, one trigger call per step:
-- for a template of 100 resources ~200 calls, each moving the deployment's counter
-- (`deployment_events_reserve`) and inserting one event, which made the request's commit
-- take ~60-110 ms and held the request (and the job's publishing) that long.
--
-- One statement-level trigger now reserves a deployment's positions in one step and inserts
-- its steps' events with one INSERT, in the steps' order. Taking them at the statement
-- instead of at COMMIT changes nothing for other transactions: the deployment's row was
-- inserted by this same transaction, so no other one can see it or wait for its lock, and
-- every position taken later in the transaction (a deferred step or status change) follows
-- these, as the statements do.

DROP TRIGGER deployment_events_step_insert ON steps;

CREATE FUNCTION deployment_events_on_steps_inserted() RETURNS trigger
LANGUAGE plpgsql SET search_path FROM CURRENT AS $$
BEGIN
    WITH counted AS (
        SELECT deployment_id, count(*) AS k
          FROM new_steps
         GROUP BY deployment_id
         ORDER BY deployment_id
    ), reserved AS MATERIALIZED (
        SELECT deployment_id, k, deployment_events_reserve(deployment_id, k) AS last
          FROM counted
    )
    INSERT INTO deployment_events (deployment_id, position, kind, step_id, step_status, reason,
        run_id, tries, error_class, plan_add, plan_change, plan_destroy, plan_replaced,
        plan_risk, started_at, finished_at)
    SELECT n.deployment_id,
           r.last - r.k
               + row_number() OVER (PARTITION BY n.deployment_id ORDER BY n.position, n.step_id),
           'step', n.step_id, n.status, n.reason, n.run_id, n.tries, n.error_class, n.plan_add,
           n.plan_change, n.plan_destroy, n.plan_replaced, n.plan_risk, n.started_at,
           n.finished_at
      FROM new_steps n
      JOIN reserved r USING (deployment_id)
     -- A deployment that is gone (no row reserved) gets no events, as before.
     WHERE r.last IS NOT NULL;
    RETURN NULL;
END
$$;

CREATE TRIGGER deployment_events_steps_inserted AFTER INSERT ON steps
    REFERENCING NEW TABLE AS new_steps
    FOR EACH STATEMENT EXECUTE FUNCTION deployment_events_on_steps_inserted();
