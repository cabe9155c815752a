-- A decision no longer rewrites a flow's whole state: it appends its events
-- and updates a few columns. `state` becomes a snapshot as of event
-- `snapshot_seq` ('' while there is none: the state is then the replay of
-- every event), written again only when the events after it outweigh it
-- (docs/durability.md, "Flow snapshots"). `error` is kept as a column for
-- listings, which no longer read the state.
ALTER TABLE flows ADD COLUMN snapshot_seq BIGINT NOT NULL DEFAULT 0;
ALTER TABLE flows ADD COLUMN snapshot_bytes BIGINT NOT NULL DEFAULT 0;
ALTER TABLE flows ADD COLUMN tail_bytes BIGINT NOT NULL DEFAULT 0;
ALTER TABLE flows ADD COLUMN error TEXT;
UPDATE flows SET snapshot_seq = sequence, snapshot_bytes = length(state),
    error = json_extract(state, '$.error');
