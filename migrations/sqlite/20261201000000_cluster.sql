-- The cluster (docs/operating.md, "Health checks and the cluster"): every
-- engine on the database writes its heartbeat here, and the latest health
-- check of each step, whichever engine made it. Health changes are the
-- events of the aggregate ('cluster', 'cluster') in `events`.
CREATE TABLE nodes (
    node_id      TEXT   PRIMARY KEY,
    started_us   BIGINT NOT NULL,
    last_seen_us BIGINT NOT NULL
);

CREATE TABLE step_health (
    step_id    TEXT   PRIMARY KEY,
    status     TEXT   NOT NULL,
    error      TEXT,
    node_id    TEXT   NOT NULL,
    checked_us BIGINT NOT NULL,
    changed_us BIGINT NOT NULL
);
