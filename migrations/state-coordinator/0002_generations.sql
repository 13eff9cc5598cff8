-- Generations: metadata of every committed state version; the payload lives in object storage.
CREATE TABLE generations (
    state_id          uuid NOT NULL REFERENCES states (state_id),
    generation        bigint NOT NULL CHECK (generation > 0),
    object_key        text NOT NULL,
    object_version    text NOT NULL,
    ciphertext_sha256 text NOT NULL,
    plaintext_sha256  text NOT NULL,
    size              bigint NOT NULL,
    key_id            text NOT NULL,
    wrapped_key       bytea NOT NULL,
    nonce             bytea NOT NULL,
    tofu_serial       bigint NOT NULL,
    lineage           text NOT NULL,
    run_id            uuid,
    attempt           integer,
    is_final          boolean NOT NULL DEFAULT false,
    recovered_from    bigint,
    created_at        timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (state_id, generation),
    CONSTRAINT generations_object_unique UNIQUE (object_key, object_version)
);
CREATE INDEX generations_run_idx ON generations (run_id, attempt);
