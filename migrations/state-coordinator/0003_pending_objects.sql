-- Pending objects: written before the payload is put, consumed by the commit transaction.
CREATE TABLE pending_objects (
    pending_id        uuid PRIMARY KEY,
    state_id          uuid NOT NULL REFERENCES states (state_id),
    attempt_id        uuid,
    target_generation bigint NOT NULL,
    object_key        text NOT NULL UNIQUE,
    plaintext_sha256  text NOT NULL,
    key_id            text NOT NULL,
    wrapped_key       bytea NOT NULL,
    nonce             bytea NOT NULL,
    created_at        timestamptz NOT NULL DEFAULT now()
);
CREATE INDEX pending_objects_age_idx ON pending_objects (created_at);
