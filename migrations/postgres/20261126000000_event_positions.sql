-- One order over every flow event of the database, for the global event
-- stream (docs/api.md, "Event streams"): `global_position` numbers flow
-- events 1, 2, 3, ... in the order they were committed, with no gap a
-- reader could skip. A batch commit takes its range from the one row of
-- `event_positions` in the same transaction; the row's lock is held until
-- that commit, so a later range is never visible before an earlier one.
-- Catalog events have none.
ALTER TABLE events ADD COLUMN global_position BIGINT;

-- The flows already stored, oldest events first.
UPDATE events SET global_position = r.n
FROM (
    SELECT aggregate_id AS fid, sequence AS seq,
           row_number() OVER (ORDER BY ts_us, aggregate_id, sequence) AS n
    FROM events WHERE aggregate_type = 'flow'
) AS r
WHERE events.aggregate_type = 'flow' AND events.aggregate_id = r.fid AND events.sequence = r.seq;

CREATE UNIQUE INDEX events_by_position ON events (global_position) WHERE global_position IS NOT NULL;

CREATE TABLE event_positions (
    id   INTEGER PRIMARY KEY,
    last BIGINT  NOT NULL
);
INSERT INTO event_positions (id, last)
SELECT 1, COALESCE(MAX(global_position), 0) FROM events;
