-- Queue messages moved to cairn-bus's generic message outbox (0005); the service's own
-- job table goes. Unsent jobs are carried over first, with their ids.
INSERT INTO message_outbox (msg_id, subject, payload, created_at)
SELECT msg_id::text, 'cairn.deployq', payload, created_at
  FROM job_outbox WHERE sent_at IS NULL AND queue = 'deployq'
ON CONFLICT (msg_id) DO NOTHING;
DROP TABLE job_outbox;
