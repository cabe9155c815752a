-- Work deferred because its step is unhealthy (docs/operating.md, "Health
-- gates dispatch"): since when each such item has waited, so that the
-- engine that sees the step healthy again finds them without a scan.
ALTER TABLE work_items ADD COLUMN deferred_us BIGINT;
CREATE INDEX work_deferred ON work_items (step_id) WHERE deferred_us IS NOT NULL;
