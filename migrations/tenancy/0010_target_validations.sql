-- The last validation of each target (ValidateTarget): requested by tenancy, which queues the
-- request on the target's run queue through the message outbox, and answered by the runner
-- serving the target (`target.validated`). One row per target, replaced by each new request;
-- an answer is kept only while it answers the row's current validation_id (compare-and-set),
-- so an older request's late answer never overwrites a newer one's. No credential is stored.
CREATE TABLE target_validations (
    target_id       uuid        PRIMARY KEY REFERENCES targets (target_id) ON DELETE CASCADE,
    tenant_id       uuid        NOT NULL,
    validation_id   uuid        NOT NULL UNIQUE,
    status          text        NOT NULL CHECK (status IN ('pending', 'succeeded', 'failed')),
    account_id      text,
    arn             text,
    error           text,
    transient       boolean     NOT NULL DEFAULT false,
    runner_instance text,
    requested_at    timestamptz NOT NULL DEFAULT now(),
    finished_at     timestamptz,
    CHECK ((status = 'pending') = (finished_at IS NULL))
);

CREATE INDEX target_validations_tenant_idx ON target_validations (tenant_id);
