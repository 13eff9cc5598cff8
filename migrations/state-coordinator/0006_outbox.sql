-- Transactional outbox (relayed to NATS by cairn-bus) and consumer dedup.
CREATE TABLE outbox (
    seq        bigserial PRIMARY KEY,
    event_id   uuid NOT NULL UNIQUE,
    payload    bytea NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    sent_at    timestamptz
);
CREATE INDEX outbox_unsent_idx ON outbox (seq) WHERE sent_at IS NULL;

CREATE TABLE processed_events (
    consumer     text NOT NULL,
    event_id     uuid NOT NULL,
    processed_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (consumer, event_id)
);
