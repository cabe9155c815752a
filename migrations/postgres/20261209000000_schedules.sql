-- Schedules (docs/schedules.md): flows started on a clock.
-- `spec`: the schedule as its client gave it (JSON, sanitised);
-- `created_us`: where `every` counts from; `next_us`: the first fire time
-- not yet made (none while paused or once no time is left), which the
-- engines' clocks read; `buffered_us`: `overlap: buffer_one`'s kept fire;
-- the last fire made, the flow it started and what it came to; `version`,
-- bumped by every change, so that of two engines making one fire only the
-- one that read the schedule first moves it on.
CREATE TABLE schedules (
    id           TEXT PRIMARY KEY,
    spec         TEXT NOT NULL,
    paused       BIGINT NOT NULL DEFAULT 0,
    created_us   BIGINT NOT NULL,
    updated_us   BIGINT NOT NULL,
    next_us      BIGINT,
    buffered_us  BIGINT,
    last_us      BIGINT,
    last_flow    TEXT,
    last_outcome TEXT,
    version      BIGINT NOT NULL DEFAULT 0
);
CREATE INDEX schedules_due ON schedules (next_us) WHERE next_us IS NOT NULL;
-- What each fire came to (the last 100 per schedule): started (its flow),
-- skipped or missed (why). One row per fire time: a fire two engines make
-- is recorded once.
CREATE TABLE schedule_fires (
    schedule_id TEXT NOT NULL REFERENCES schedules (id) ON DELETE CASCADE,
    fire_us     BIGINT NOT NULL,
    outcome     TEXT NOT NULL,
    flow_id     TEXT,
    detail      TEXT,
    made_us     BIGINT NOT NULL,
    PRIMARY KEY (schedule_id, fire_us)
);
