-- Runs registered by the workflow, and their attempts (one per admission).
CREATE TABLE runs (
    run_id             uuid PRIMARY KEY,
    state_id           uuid NOT NULL REFERENCES states (state_id),
    tenant_id          uuid NOT NULL,
    kind               text NOT NULL CHECK (kind IN ('plan', 'apply', 'destroy', 'preview', 'drift')),
    environment        text NOT NULL,
    config_hash        text NOT NULL,
    config_key_id      text NOT NULL,
    config_wrapped_key bytea NOT NULL,
    config_nonce       bytea NOT NULL,
    config_ciphertext  bytea NOT NULL,
    context            jsonb NOT NULL,
    plan_run_id        uuid REFERENCES runs (run_id),
    status             text NOT NULL DEFAULT 'registered',
    outcome_message    text,
    current_attempt    integer NOT NULL DEFAULT 0,
    created_by         text NOT NULL,
    created_at         timestamptz NOT NULL DEFAULT now(),
    finished_at        timestamptz
);
CREATE INDEX runs_state_idx ON runs (state_id);

CREATE TABLE attempts (
    attempt_id            uuid PRIMARY KEY,
    run_id                uuid NOT NULL REFERENCES runs (run_id),
    attempt               integer NOT NULL CHECK (attempt > 0),
    state_id              uuid NOT NULL REFERENCES states (state_id),
    token_hash            text NOT NULL UNIQUE,
    read_only             boolean NOT NULL,
    base_generation       bigint NOT NULL,
    state_object_id       text,
    state_status_at_start text NOT NULL,
    last_seen_generation  bigint NOT NULL,
    last_written_generation bigint,
    lease_expires_at      timestamptz NOT NULL,
    revoked_at            timestamptz,
    finished_at           timestamptz,
    outcome               text,
    refusal_reason        text,
    created_at            timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT attempts_run_attempt_unique UNIQUE (run_id, attempt)
);

-- A lock belongs to exactly one attempt; at most one per state.
CREATE TABLE locks (
    state_id    uuid PRIMARY KEY REFERENCES states (state_id),
    lock_id     text NOT NULL,
    attempt_id  uuid NOT NULL REFERENCES attempts (attempt_id),
    info        jsonb NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
