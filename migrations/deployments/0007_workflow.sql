-- The workflow worker: cancel requests and approval parking on deployments, the runs of
-- every step (the exact registration persisted before it is sent, the first result of the
-- run written by the result consumer), and the per-target deployment slots.
ALTER TABLE deployments
    ADD COLUMN started_at          timestamptz,
    ADD COLUMN awaiting_since      timestamptz,
    ADD COLUMN cancel_requested_at timestamptz,
    ADD COLUMN cancel_reason       text NOT NULL DEFAULT '';

CREATE INDEX deployments_awaiting_idx ON deployments (awaiting_since)
    WHERE status = 'awaiting_approval';

-- One row per run a step registered, in order (seq from 1). The registration (root config
-- bytes, their hash, the encoded execution context, the run id) is written here before
-- RegisterRun is called, so a resumed worker re-sends exactly the same content.
CREATE TABLE step_runs (
    run_id          uuid        PRIMARY KEY,
    step_id         uuid        NOT NULL REFERENCES steps (step_id) ON DELETE CASCADE,
    deployment_id   uuid        NOT NULL REFERENCES deployments (deployment_id) ON DELETE CASCADE,
    seq             integer     NOT NULL CHECK (seq > 0),
    kind            text        NOT NULL CHECK (kind IN ('plan', 'apply', 'destroy', 'preview')),
    state_id        uuid        NOT NULL,
    root_config     bytea       NOT NULL,
    config_hash     text        NOT NULL,
    context         bytea       NOT NULL,
    plan_run_id     uuid,
    -- pending: persisted, maybe registered; requested: its request is in the outbox.
    status          text        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'requested')),
    requested_at    timestamptz,
    cancel_sent     boolean     NOT NULL DEFAULT false,
    -- The plan set an approval bound this plan run to (empty: not approved).
    approved_hash   text        NOT NULL DEFAULT '',
    -- The first full result (keyed by run and attempt); NULL until it arrives.
    attempt         integer,
    outcome         text,
    error_class     text,
    message         text,
    summary         bytea,
    plan_sha256     text,
    base_generation bigint,
    final_generation bigint,
    result_at       timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    UNIQUE (step_id, seq)
);

CREATE INDEX step_runs_deployment_idx ON step_runs (deployment_id, step_id, seq);

-- A deployment holds one slot of its target while it runs (not while it is queued or
-- parked for approval); previews take none. The unique keys settle races: a slot number
-- is held by one deployment, a deployment holds at most one slot.
CREATE TABLE target_slots (
    target_id     uuid        NOT NULL,
    slot          integer     NOT NULL CHECK (slot > 0),
    deployment_id uuid        NOT NULL UNIQUE REFERENCES deployments (deployment_id) ON DELETE CASCADE,
    taken_at      timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (target_id, slot)
);
