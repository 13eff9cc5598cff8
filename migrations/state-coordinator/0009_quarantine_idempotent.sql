-- Quarantine is idempotent on (run, attempt, sha256 of the plaintext): a runner re-sending an
-- errored.tfstate after a lost response stores it once and gets the same quarantine id back.
-- A different file for the same attempt is a new entry (nothing a runner hands in is dropped).
-- Before this migration every Quarantine call was answered once by a runner that did not
-- retry, so no duplicates exist to fold.
ALTER TABLE quarantine
    ADD CONSTRAINT quarantine_run_attempt_sha_unique UNIQUE (run_id, attempt, plaintext_sha256);
