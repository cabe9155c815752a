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
-- An id prefix is matched as a range of bytes, `f.id COLLATE "C" >= lo AND
-- f.id COLLATE "C" < hi`: under the database's own collation (anything
-- but C) neither a LIKE nor a range can use the primary key. Root flows...
CREATE INDEX flows_roots_by_id ON flows (id COLLATE "C") WHERE id NOT LIKE '%:%';
-- ...and, for a listing that shows children, every flow.
CREATE INDEX flows_by_id_bytes ON flows (id COLLATE "C");
