-- Every index on a hot table is written by every commit that inserts a row
-- or changes one of its columns; each kept index is justified by a query
-- that needs it (docs/durability.md, "Indexes on the hot tables").
--
-- `work_due` (due_us WHERE status = 'not_completed') serves no statement:
-- the timer scan uses `work_timers`, claiming a due item the primary key.
DROP INDEX IF EXISTS work_due;
-- The deadline scan (`status = 'active' AND deadline_us < $1`) reads only
-- flows with a deadline: a flow started without one writes no entry.
DROP INDEX IF EXISTS flows_by_deadline;
CREATE INDEX flows_by_deadline ON flows (deadline_us) WHERE status = 'active' AND deadline_us IS NOT NULL;
