-- The generation that was current when an attempt finished, so a retried FinishRun gives
-- the same answer after other runs moved the state on.
ALTER TABLE attempts ADD COLUMN final_generation bigint;
