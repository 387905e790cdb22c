-- The changed-rows read (migration 0007) walked every seat row of the show:
-- without this index SQLite can only filter `changed` row by row, 20,000
-- rows for a 20,000-seat show on every availability read. With it the read
-- visits only what changed; the price is one more index entry per seat
-- update, in a transaction already paying for the event and the row.
CREATE INDEX seat_availability_changes ON seat_availability (show_id, changed);
