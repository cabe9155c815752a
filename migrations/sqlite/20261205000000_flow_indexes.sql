-- Flow listings (`POST /engine/flow/query`, `GET /engine/flow`, bulk jobs;
-- `sql::filter`) hide child flows (ids with a `:`) unless asked, and page
-- by `created_us, id`. Walking `flows_by_created` and dropping children
-- row by row read every child between two root flows: under a parent with
-- 10,000 sub-flows, each page read 10,000 rows. These indexes hold root
-- flows only; their predicate is the listing's condition word for word
-- (`sql::filter::ROOTS_ONLY`), which is what lets the planner use them.
-- Root flows in creation order: a listing, and its cursor's next page.
CREATE INDEX flows_roots_by_created ON flows (created_us, id) WHERE id NOT LIKE '%:%';
-- Root flows with a status (`status IN (...)`), in creation order.
CREATE INDEX flows_roots_by_status ON flows (status, created_us, id) WHERE id NOT LIKE '%:%';
-- An id prefix is matched as a range, `f.id >= lo AND f.id < hi` (the
-- BINARY collation compares bytes, so the range is exact; a LIKE with an
-- ESCAPE clause can use no index). Root flows here; with children shown,
-- the primary key serves the range.
CREATE INDEX flows_roots_by_id ON flows (id) WHERE id NOT LIKE '%:%';
