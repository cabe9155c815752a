-- Large values stored once per flow (docs/durability.md, "Large values"):
-- an event or a snapshot whose text is large keeps its large JSON values
-- here, keyed by the flow and the SHA-256 of the value's text, and holds
-- only a skeleton with references (`value_refs`, `state_refs`:
-- `offset:hash` pairs) where they go. `value_bytes` is what the values
-- add to the event's text, so that pages are measured by what they send.
CREATE TABLE flow_values (
    flow_id TEXT NOT NULL,
    hash    TEXT NOT NULL,
    data    TEXT NOT NULL,
    PRIMARY KEY (flow_id, hash)
);
ALTER TABLE events ADD COLUMN value_refs TEXT;
ALTER TABLE events ADD COLUMN value_bytes BIGINT;
ALTER TABLE flows ADD COLUMN state_refs TEXT;
