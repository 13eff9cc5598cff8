-- A pending row only has to name the object a write is about to put, so that the sweeper can
-- delete it if the write never commits. The key and digest columns were never read; without
-- them the row can be written before the write's data key exists (a POST writes it while it
-- waits for the key manager).
ALTER TABLE pending_objects
    DROP COLUMN plaintext_sha256,
    DROP COLUMN key_id,
    DROP COLUMN wrapped_key,
    DROP COLUMN nonce;
