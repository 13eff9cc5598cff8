-- A run's own start (its attempt's admission) and end, by the runner's clock, from its
-- RunResult: the run's duration without the workflow's and the queue's time around it.
ALTER TABLE step_runs ADD COLUMN run_started_at timestamptz;
ALTER TABLE step_runs ADD COLUMN run_finished_at timestamptz;
