-- Bulk jobs (docs/api.md, "Bulk operations"): a retry or cancel of many
-- flows, run by one process at a time under a lease, at a bounded rate.
-- `filter` and `options` are JSON as the request gave them; the flows the
-- filter matched are snapshotted into `bulk_items` when the job is created.
CREATE TABLE bulk_jobs (
    id               TEXT   PRIMARY KEY,
    kind             TEXT   NOT NULL,
    filter           TEXT   NOT NULL,
    options          TEXT   NOT NULL,
    rate             BIGINT NOT NULL,
    status           TEXT   NOT NULL,
    total            BIGINT NOT NULL,
    done             BIGINT NOT NULL DEFAULT 0,
    skipped          BIGINT NOT NULL DEFAULT 0,
    failed           BIGINT NOT NULL DEFAULT 0,
    created_us       BIGINT NOT NULL,
    started_us       BIGINT,
    finished_us      BIGINT,
    lease_owner      TEXT,
    lease_expires_us BIGINT
);
CREATE INDEX bulk_jobs_by_created ON bulk_jobs (created_us);
-- Jobs still to run: what a process looks for at start and when woken.
CREATE INDEX bulk_jobs_unfinished ON bulk_jobs (status) WHERE status IN ('queued', 'running');
CREATE INDEX bulk_jobs_by_finished ON bulk_jobs (finished_us) WHERE finished_us IS NOT NULL;

-- One row per matched flow; `position` is the order it is acted on in.
CREATE TABLE bulk_items (
    job_id   TEXT   NOT NULL,
    flow_id  TEXT   NOT NULL,
    position BIGINT NOT NULL,
    state    TEXT   NOT NULL,
    detail   TEXT,
    at_us    BIGINT,
    PRIMARY KEY (job_id, flow_id)
);
CREATE INDEX bulk_items_pending ON bulk_items (job_id, position) WHERE state = 'pending';
CREATE INDEX bulk_items_by_state ON bulk_items (job_id, state, position);
