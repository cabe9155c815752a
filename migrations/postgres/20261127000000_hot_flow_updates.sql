-- Room on each page of `flows` for a row's next version. A decision in the
-- middle of a flow changes only columns no index covers (sequence,
-- updated_us, tail_bytes), so Postgres can write the new version beside
-- the old one without touching the table's five indexes (a "HOT" update),
-- if the page has room; a full page forces a new entry in every index.
-- Applies to pages written from now on.
ALTER TABLE flows SET (fillfactor = 70);
