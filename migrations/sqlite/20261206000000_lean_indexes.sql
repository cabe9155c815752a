-- Every index on a hot table is written by every commit that inserts a row
-- or changes one of its columns; each kept index is justified by a query
-- that needs it (docs/durability.md, "Indexes on the hot tables").
--
-- `work_due` (due_us WHERE status = 'not_completed') serves no statement:
-- the timer scan uses `work_timers`, claiming a due item the primary key.
DROP INDEX IF EXISTS work_due;
-- `flows_by_status` (status, created_us) serves only a listing with child
-- flows and a status, which reads `flows_by_created` instead. SQLite keeps
-- no statistics, and with this index present it chose it over the indexes
-- made for the deadline scan, the purge and the deferred work: 28.6 ms
-- against 0.12 ms for a purge pick on 200,000 flows.
DROP INDEX IF EXISTS flows_by_status;
-- The deadline scan (`status = 'active' AND deadline_us < ?`) reads only
-- flows with a deadline: a flow started without one writes no entry.
DROP INDEX IF EXISTS flows_by_deadline;
CREATE INDEX flows_by_deadline ON flows (deadline_us) WHERE status = 'active' AND deadline_us IS NOT NULL;
