-- The log position current when each seat row last changed (one writer:
-- positions follow commit order), so a reader can fetch only what changed
-- since its last look.
ALTER TABLE seat_availability ADD COLUMN changed integer NOT NULL DEFAULT 0;

CREATE TRIGGER seat_availability_changed
AFTER UPDATE OF status, hold_id, buyer, expires_at_us, booking_id, last_seq ON seat_availability
BEGIN
    UPDATE seat_availability SET changed = (SELECT COALESCE(MAX(position), 0) FROM events)
    WHERE rowid = NEW.rowid;
END;
