-- The log lines of a step's runs (from cairn.runlog.<run_id>, already redacted by the
-- runner), bounded per step: of the lines received, the first ceil(N/2) and the last
-- floor(N/2) are kept (N = CAIRN_STEP_LOG_LINES); `received` counts every line, so a step
-- with fewer kept lines than received ones is truncated.
CREATE TABLE step_logs (
    step_id   uuid    NOT NULL REFERENCES steps (step_id) ON DELETE CASCADE,
    -- The line's place among the step's received lines (1, 2, …).
    n         bigint  NOT NULL CHECK (n > 0),
    run_id    uuid    NOT NULL,
    attempt   integer NOT NULL,
    seq       bigint  NOT NULL,
    stream    text    NOT NULL,
    text      text    NOT NULL,
    PRIMARY KEY (step_id, n),
    UNIQUE (run_id, attempt, seq)
);

CREATE TABLE step_log_counts (
    step_id   uuid    PRIMARY KEY REFERENCES steps (step_id) ON DELETE CASCADE,
    received  bigint  NOT NULL DEFAULT 0
);

-- Lines name their run; the step is found by it.
CREATE INDEX IF NOT EXISTS steps_run_id_idx ON steps (run_id) WHERE run_id IS NOT NULL;
