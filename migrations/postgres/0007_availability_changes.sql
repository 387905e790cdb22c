-- Which transaction last changed each seat row, so that a reader can fetch
-- only what changed since its last look: rows changed by transactions at or
-- above the xmin of its previous snapshot (any transaction it could not see
-- then has an id at least that high).
ALTER TABLE seat_availability ADD COLUMN changed_txid xid8 NOT NULL DEFAULT '0';

CREATE FUNCTION seat_availability_changed() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    NEW.changed_txid := pg_current_xact_id();
    RETURN NEW;
END
$$;

CREATE TRIGGER seat_availability_changed BEFORE UPDATE ON seat_availability
    FOR EACH ROW EXECUTE FUNCTION seat_availability_changed();

-- The reader visits only the rows that changed (an update of changed_txid
-- is then no longer HOT: measured, the write path loses less than the
-- availability read gains under load; see BENCHMARKS.md).
CREATE INDEX seat_availability_changes ON seat_availability (show_id, changed_txid);
