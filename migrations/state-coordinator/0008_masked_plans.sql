-- What outlives a saved plan (which is deleted once an apply took it, or at its TTL): the
-- sha256 of the plan bytes and the base generation (what an approval is bound to), and the
-- masked plan JSON for review (Runs.GetMaskedPlan), sealed in object storage under
-- `masked-plans/<state id>/<plan id>` like the plan itself. One row per plan run. Runs are
-- never deleted, so neither are these rows; a run retention would prune them with the run.
CREATE TABLE masked_plans (
    plan_id           uuid PRIMARY KEY,
    run_id            uuid NOT NULL UNIQUE REFERENCES runs (run_id),
    state_id          uuid NOT NULL REFERENCES states (state_id),
    plan_sha256       text NOT NULL,
    base_generation   bigint NOT NULL,
    -- The sealed masked JSON: all set, or all NULL when the runner sent none.
    object_key        text,
    object_version    text,
    key_id            text,
    wrapped_key       bytea,
    nonce             bytea,
    ciphertext_sha256 text,
    plaintext_sha256  text,
    created_at        timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT masked_plans_sealed_all_or_nothing CHECK (
        num_nulls(object_key, object_version, key_id, wrapped_key, nonce, ciphertext_sha256,
                  plaintext_sha256) IN (0, 7))
);
CREATE INDEX masked_plans_state_idx ON masked_plans (state_id);
