-- Flow deadlines as an indexed column, so that timers reload them at start
-- and a deadline that passed while the engine was down fires at once.
ALTER TABLE flows ADD COLUMN deadline_us BIGINT;
CREATE INDEX flows_by_deadline ON flows (deadline_us) WHERE status = 'active';
-- Timers of work items: retries (not_completed) and inactivity windows (active).
CREATE INDEX work_timers ON work_items (due_us) WHERE due_us IS NOT NULL;
