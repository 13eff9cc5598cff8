-- Saved plans (encrypted in object storage) and quarantined errored.tfstate files.
CREATE TABLE plans (
    plan_id             uuid PRIMARY KEY,
    run_id              uuid NOT NULL UNIQUE REFERENCES runs (run_id),
    state_id            uuid NOT NULL REFERENCES states (state_id),
    object_key          text NOT NULL,
    object_version      text NOT NULL,
    key_id              text NOT NULL,
    wrapped_key         bytea NOT NULL,
    nonce               bytea NOT NULL,
    ciphertext_sha256   text NOT NULL,
    config_hash         text NOT NULL,
    base_generation     bigint NOT NULL,
    tofu_version        text NOT NULL,
    provider_lock_hash  text NOT NULL,
    module_library_hash text NOT NULL,
    provider_lock_file  bytea NOT NULL,
    leased_to_attempt   uuid REFERENCES attempts (attempt_id),
    expires_at          timestamptz NOT NULL,
    created_at          timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE quarantine (
    quarantine_id     uuid PRIMARY KEY,
    state_id          uuid NOT NULL REFERENCES states (state_id),
    run_id            uuid NOT NULL REFERENCES runs (run_id),
    attempt           integer NOT NULL,
    object_key        text NOT NULL,
    object_version    text NOT NULL,
    key_id            text NOT NULL,
    wrapped_key       bytea NOT NULL,
    nonce             bytea NOT NULL,
    plaintext_sha256  text NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now()
);

-- Coordinator-wide switches (a single row).
CREATE TABLE coordinator_flags (
    singleton     boolean PRIMARY KEY DEFAULT true CHECK (singleton),
    after_restore boolean NOT NULL DEFAULT false,
    reason        text,
    changed_at    timestamptz NOT NULL DEFAULT now()
);
INSERT INTO coordinator_flags (singleton) VALUES (true);
