-- Concurrency keys (docs/concurrency.md): each flow started with a key
-- has a row in its key's line from the commit that starts it (or retries
-- it) to the commit that ends it. `state`: `waiting` for its turn;
-- `admitting`, let in by an engine that has yet to commit the flow's
-- `flow_admitted` (`admitted_us`: when; the sweep finishes what a dead
-- engine left); `running`. `turn_us`: when it joined, moved earlier by its
-- priority, the order turns are given in (ties by flow id).
CREATE TABLE flow_lines (
    flow_id     TEXT PRIMARY KEY,
    key         TEXT NOT NULL,
    lim         BIGINT NOT NULL,
    turn_us     BIGINT NOT NULL,
    queued_us   BIGINT NOT NULL,
    state       TEXT NOT NULL,
    admitted_us BIGINT
);
-- A key's waiting flows in turn order, and its count of running ones.
CREATE INDEX flow_lines_turns ON flow_lines (key, state, turn_us, flow_id);
