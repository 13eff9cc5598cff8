-- Message outbox trace context (from cairn-bus MESSAGE_OUTBOX_TRACE_MIGRATION_SQL): the W3C
-- trace context of the span that wrote the message, published as its headers.
ALTER TABLE message_outbox ADD COLUMN traceparent text, ADD COLUMN tracestate text;
