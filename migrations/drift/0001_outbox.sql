-- Transactional outbox and consumer idempotency keys (from cairn-bus OUTBOX_MIGRATION_SQL).
CREATE TABLE outbox (
    seq        bigserial   PRIMARY KEY,
    event_id   uuid        NOT NULL UNIQUE,
    payload    bytea       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    sent_at    timestamptz
);

-- The relay scans unsent rows in order; sent rows are pruned by age.
CREATE INDEX outbox_unsent_idx ON outbox (seq) WHERE sent_at IS NULL;
CREATE INDEX outbox_sent_at_idx ON outbox (sent_at) WHERE sent_at IS NOT NULL;

CREATE TABLE processed_events (
    consumer     text        NOT NULL,
    event_id     uuid        NOT NULL,
    processed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, event_id)
);

CREATE INDEX processed_events_processed_at_idx ON processed_events (processed_at);
