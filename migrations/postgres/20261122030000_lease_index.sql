-- Claiming calls whose lease expired reads only active and compensating
-- items. The old index covered 'active' alone, so the claim (every sweep)
-- read every row, waiting retries included: with 100,000 of them that was
-- most of an idle engine's CPU.
DROP INDEX work_active_leases;
CREATE INDEX work_leases ON work_items (lease_expires_us) WHERE status IN ('active', 'compensating');
