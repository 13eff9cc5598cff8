-- The counter rule once: `k` positions taken together (the log ingester's batches) and one
-- position (a step's trigger) both move the deployment's `event_seq` here.

-- Takes the deployment's next `k` positions; returns the last of them (holds the deployment's
-- row lock until the transaction ends; no row when the deployment is gone).
CREATE FUNCTION deployment_events_reserve(d uuid, k bigint) RETURNS bigint
LANGUAGE sql SET search_path FROM CURRENT AS $$
    UPDATE deployments SET event_seq = event_seq + k WHERE deployment_id = d RETURNING event_seq
$$;

CREATE OR REPLACE FUNCTION deployment_event_next(d uuid) RETURNS bigint
LANGUAGE sql SET search_path FROM CURRENT AS $$
    SELECT deployment_events_reserve(d, 1)
$$;
