-- Flow listings show running flows first, then ended ones, each group in
-- time order (Argyll's order; docs/api.md, "Listing flows"): a running
-- flow by its start (`flows_roots_by_status`), an ended one by its end.
-- This index serves the ended group and its cursor's next page; a flow
-- enters it once, when it ends (its predicate is the listing's condition
-- word for word, which is what lets the planner use it).
CREATE INDEX flows_roots_by_end ON flows (completed_us, id) WHERE id NOT LIKE '%:%' AND status <> 'active';
