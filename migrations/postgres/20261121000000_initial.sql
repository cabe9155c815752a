-- Tartan's schema for Postgres (and Postgres-compatible distributed SQL: no
-- extensions, no Postgres-only functions). Applied migrations are never edited; add a new
-- file instead. Times are microseconds since the Unix epoch (BIGINT) so that
-- both stores compare and index them the same way.

-- The truth: every change of a flow or of the catalog, in order.
CREATE TABLE events (
    aggregate_type TEXT   NOT NULL,
    aggregate_id   TEXT   NOT NULL,
    sequence       BIGINT NOT NULL,
    event_type     TEXT   NOT NULL,
    ts_us          BIGINT NOT NULL,
    data           TEXT   NOT NULL,
    PRIMARY KEY (aggregate_type, aggregate_id, sequence)
);

-- Projection: the step catalog.
CREATE TABLE steps (
    id         TEXT   PRIMARY KEY,
    definition TEXT   NOT NULL,
    updated_us BIGINT NOT NULL
);

-- Projection: one row per flow, its whole state as JSON.
CREATE TABLE flows (
    id             TEXT   PRIMARY KEY,
    status         TEXT   NOT NULL,
    sequence       BIGINT NOT NULL,
    created_us     BIGINT NOT NULL,
    updated_us     BIGINT NOT NULL,
    completed_us   BIGINT,
    deactivated_us BIGINT,
    request        TEXT   NOT NULL,
    state          TEXT   NOT NULL
);
CREATE INDEX flows_by_created ON flows (created_us, id);
CREATE INDEX flows_by_status ON flows (status, created_us);

CREATE TABLE flow_labels (
    flow_id TEXT NOT NULL,
    key     TEXT NOT NULL,
    value   TEXT NOT NULL,
    PRIMARY KEY (flow_id, key)
);
CREATE INDEX flow_labels_by_value ON flow_labels (key, value);

-- Projection: one row per work item, for queries and for claiming due work.
CREATE TABLE work_items (
    token            TEXT   PRIMARY KEY,
    flow_id          TEXT   NOT NULL,
    step_id          TEXT   NOT NULL,
    status           TEXT   NOT NULL,
    attempt          BIGINT NOT NULL,
    retry_count      BIGINT NOT NULL,
    due_us           BIGINT,
    lease_owner      TEXT,
    lease_expires_us BIGINT,
    created_us       BIGINT NOT NULL,
    updated_us       BIGINT NOT NULL,
    detail           TEXT   NOT NULL
);
CREATE INDEX work_by_flow ON work_items (flow_id);
CREATE INDEX work_by_created ON work_items (created_us, token);
CREATE INDEX work_active_leases ON work_items (lease_expires_us) WHERE status = 'active';
