-- Retention (docs/operating.md, "Retention"): the purge looks for finished flows
-- by when they were deactivated, oldest first. Only finished flows have the
-- column set, so the index holds nothing of the flows still running.
CREATE INDEX flows_by_deactivated ON flows (deactivated_us) WHERE deactivated_us IS NOT NULL;
