-- Global positions given after the commit instead of in it (docs/api.md,
-- "Event streams"; docs/durability.md, "Global positions"). Taking a range
-- of positions in the commit held the one `event_positions` row until the
-- commit was flushed, so every engine's commits waited for each other's
-- WAL flush. Now a batch commit numbers its events within a batch of its
-- own (`event_batches`, its id from a sequence: no lock), and a batch is
-- given its first position once committed, by whoever reads the feed, in
-- one short transaction that holds the `event_positions` row: batches are
-- positioned in the order they are seen committed, gap-free, and nothing
-- is positioned before it is durable.
--
-- Expand only: the events stored before keep their `global_position`, and
-- an engine of the last release, running beside this one during a rolling
-- update, still takes its positions from the same row in its commit (the
-- row orders the two ways). The feed reads both. A later release drops
-- `global_position` once no engine writes it.
CREATE SEQUENCE event_batch_ids;

CREATE TABLE event_batches (
    id             BIGINT PRIMARY KEY,
    event_count    BIGINT NOT NULL,
    first_position BIGINT
);
-- The batches still to position, oldest first.
CREATE INDEX event_batches_unpositioned ON event_batches (id) WHERE first_position IS NULL;
-- The feed's ranges.
CREATE UNIQUE INDEX event_batches_by_position ON event_batches (first_position)
    WHERE first_position IS NOT NULL;

ALTER TABLE events ADD COLUMN batch_id BIGINT, ADD COLUMN batch_offset INTEGER;
CREATE UNIQUE INDEX events_by_batch ON events (batch_id, batch_offset) WHERE batch_id IS NOT NULL;
