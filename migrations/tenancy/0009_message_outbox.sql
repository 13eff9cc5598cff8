-- Message outbox (from cairn-bus MESSAGE_OUTBOX_MIGRATION_SQL): messages to publish to a
-- subject (root namespace) with a Nats-Msg-Id, written in the transaction that makes them due.
CREATE TABLE message_outbox (
    seq        bigserial   PRIMARY KEY,
    msg_id     text        NOT NULL UNIQUE CHECK (msg_id <> ''),
    subject    text        NOT NULL CHECK (subject <> ''),
    payload    bytea       NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    sent_at    timestamptz
);

CREATE INDEX message_outbox_unsent_idx ON message_outbox (seq) WHERE sent_at IS NULL;
CREATE INDEX message_outbox_sent_at_idx ON message_outbox (sent_at) WHERE sent_at IS NOT NULL;
