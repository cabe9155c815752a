-- Memoized step results (docs/steps.md, "Memoization"): a memoizable
-- step's answer, keyed by the SHA-256 of the step's functional definition
-- and the inputs of the call, shared by every engine on the database and
-- kept across restarts. The first answer stored for a key is kept.
-- `expires_us`: the step's `memo_ttl` (none: until evicted by the bound).
CREATE TABLE memos (
    key        TEXT PRIMARY KEY,
    step_id    TEXT NOT NULL,
    outputs    TEXT NOT NULL,
    created_us BIGINT NOT NULL,
    expires_us BIGINT
);
CREATE INDEX memos_created ON memos (created_us);
