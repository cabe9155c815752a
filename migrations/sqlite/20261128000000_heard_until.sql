-- The end of an accepted async call's inactivity window as its last
-- heartbeat set it, when no event recorded it (docs/timeouts.md,
-- "Heartbeats"): consulted when the recorded window ends.
ALTER TABLE work_items ADD COLUMN heard_until_us BIGINT;
