-- Webhook subscriptions, their outbox of deliveries (one row per event and subscription, with a
-- per-subscription sequence) and the log of every attempt.
CREATE TABLE webhook_subscriptions (
    subscription_id      uuid        PRIMARY KEY,
    tenant_id            uuid        NOT NULL REFERENCES tenants (tenant_id),
    url                  text        NOT NULL,
    event_types          text[]      NOT NULL CHECK (cardinality(event_types) > 0),
    -- The HMAC key, kept as generated (the sender must sign with it, so it cannot be hashed);
    -- returned only by Create, never listed, logged, audited or published.
    secret               text        NOT NULL,
    description          text        NOT NULL DEFAULT '',
    enabled              boolean     NOT NULL DEFAULT true,
    disabled_reason      text,
    disabled_at          timestamptz,
    -- Failed attempts since the last success; reaching the limit disables the subscription.
    consecutive_failures integer     NOT NULL DEFAULT 0 CHECK (consecutive_failures >= 0),
    -- The sequence the next delivery gets (allocated under the row lock of an UPDATE).
    next_sequence        bigint      NOT NULL DEFAULT 1 CHECK (next_sequence > 0),
    created_at           timestamptz NOT NULL DEFAULT now()
);

CREATE INDEX webhook_subscriptions_tenant_idx ON webhook_subscriptions (tenant_id, subscription_id);

CREATE TABLE webhook_deliveries (
    delivery_id     uuid        PRIMARY KEY,
    subscription_id uuid        NOT NULL REFERENCES webhook_subscriptions (subscription_id) ON DELETE CASCADE,
    tenant_id       uuid        NOT NULL,
    sequence        bigint      NOT NULL CHECK (sequence > 0),
    event_id        uuid        NOT NULL,
    event_type      text        NOT NULL,
    occurred_at     timestamptz NOT NULL,
    -- The event's ids and non-secret summary (the body is built from these columns).
    data            jsonb       NOT NULL,
    status          text        NOT NULL DEFAULT 'pending' CHECK (status IN ('pending', 'delivered', 'failed')),
    attempts        integer     NOT NULL DEFAULT 0 CHECK (attempts >= 0),
    next_attempt_at timestamptz NOT NULL DEFAULT now(),
    -- A sender holds a delivery while it sends: claimed with FOR UPDATE SKIP LOCKED, held
    -- until lease_until, settled only by the holder (compare-and-set on lease_owner).
    lease_owner     uuid,
    lease_until     timestamptz,
    created_at      timestamptz NOT NULL DEFAULT now(),
    finished_at     timestamptz,
    UNIQUE (subscription_id, sequence),
    UNIQUE (subscription_id, event_id)
);

-- The sender's scan: due pending deliveries, and the head (lowest pending sequence) of each
-- subscription.
CREATE INDEX webhook_deliveries_due_idx ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_pending_seq_idx ON webhook_deliveries (subscription_id, sequence) WHERE status = 'pending';

CREATE TABLE webhook_attempts (
    delivery_id   uuid        NOT NULL REFERENCES webhook_deliveries (delivery_id) ON DELETE CASCADE,
    attempt       integer     NOT NULL CHECK (attempt > 0),
    started_at    timestamptz NOT NULL DEFAULT now(),
    latency_ms    bigint,
    response_code integer,
    outcome       text        NOT NULL CHECK (outcome IN ('in_flight', 'delivered', 'retry', 'failed', 'abandoned')),
    error         text,
    PRIMARY KEY (delivery_id, attempt)
);
