-- Work items waiting for a retry, by due time: the timers load them at start.
CREATE INDEX work_due ON work_items (due_us) WHERE status = 'not_completed';
