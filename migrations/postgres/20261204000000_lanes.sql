-- Lanes (docs/lanes.md): limits shared by the calls of one step or one
-- endpoint host across every engine on the database.
-- `lanes`: one row per lane, its state in one place so that one row lock
-- orders every change: `limits` as last declared (JSON); `tat_us`, the rate's
-- state (when the next call would start if calls came evenly); a pause
-- (`Retry-After` from the endpoint, or an operator: `paused_until_us`, with
-- no end for an operator's pause) and its reason; the circuit breaker's
-- state, its consecutive failures, and until when it is open (or, half
-- open, until when its one canary call may run).
CREATE TABLE lanes (
    id               TEXT PRIMARY KEY,
    limits           TEXT NOT NULL,
    tat_us           BIGINT NOT NULL DEFAULT 0,
    paused_until_us  BIGINT,
    paused_reason    TEXT,
    breaker          TEXT NOT NULL DEFAULT 'closed',
    failures         BIGINT NOT NULL DEFAULT 0,
    breaker_until_us BIGINT,
    updated_us       BIGINT NOT NULL
);
-- The slots of a lane with a concurrency limit that each engine holds
-- (`held`), how many it would use (`wanted`), and its lease on them: a
-- killed engine's slots count no more once `lease_us` passes.
CREATE TABLE lane_holds (
    lane_id  TEXT NOT NULL,
    node_id  TEXT NOT NULL,
    held     BIGINT NOT NULL,
    wanted   BIGINT NOT NULL,
    lease_us BIGINT NOT NULL,
    PRIMARY KEY (lane_id, node_id)
);
CREATE INDEX lane_holds_node ON lane_holds (node_id);
