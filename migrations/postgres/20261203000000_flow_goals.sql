-- A flow's goals (a JSON array of step ids), written when it is created,
-- so that a page of flows (the dashboard's list, `POST /engine/flow/query`)
-- shows them without reading each flow's state. NULL for flows created
-- before this column: they are shown without goals.
ALTER TABLE flows ADD COLUMN goals TEXT;
