-- Traces (issue 15): the W3C traceparent of the RegisterRun call, so the backend spans of
-- the run's tofu (whose HTTP backend sends no trace headers) link to the run's trace.
ALTER TABLE runs ADD COLUMN traceparent text;
