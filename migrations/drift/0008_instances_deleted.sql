-- An instance deleted by deployments (`instance.deleted`) stays as a tombstone, so that a
-- late or redelivered event of it never brings it back; its tracked resources, findings,
-- ignore rules and deployments are removed in the event's transaction.
ALTER TABLE instances ADD COLUMN deleted_at timestamptz;
