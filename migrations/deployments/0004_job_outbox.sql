-- Work-queue messages (deployment jobs on cairn.deployq; later run requests on
-- cairn.runq.<target>) written in the transaction of the change that makes them due, and
-- published by the job relay with `msg_id` as Nats-Msg-Id. cairn-bus's outbox carries
-- domain events only, so the queues have this table of their own.
CREATE TABLE job_outbox (
    seq        bigserial   PRIMARY KEY,
    msg_id     uuid        NOT NULL UNIQUE,
    queue      text        NOT NULL CHECK (queue IN ('deployq', 'runq')),
    -- The subject's last token where the queue has one (runq: the target id).
    queue_key  text        NOT NULL DEFAULT '',
    payload    bytea       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    sent_at    timestamptz
);

CREATE INDEX job_outbox_unsent_idx ON job_outbox (seq) WHERE sent_at IS NULL;
CREATE INDEX job_outbox_sent_at_idx ON job_outbox (sent_at) WHERE sent_at IS NOT NULL;
