-- Sales channels and reports (issue #35): see migrations/postgres/0020.
ALTER TABLE seat_availability ADD COLUMN channel text;
ALTER TABLE seat_availability ADD COLUMN ticket_type text;
ALTER TABLE seat_availability ADD COLUMN price_cents integer;
ALTER TABLE pool_shards ADD COLUMN allocated text NOT NULL DEFAULT '{}';
ALTER TABLE pool_shards ADD COLUMN sales text NOT NULL DEFAULT '[]';
ALTER TABLE pool_holds ADD COLUMN channel text;
ALTER TABLE pool_holds ADD COLUMN ticket_type text;
ALTER TABLE pool_holds ADD COLUMN price_cents integer;
