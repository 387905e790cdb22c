-- The waiting list over pools (issue #36): places freed by the end of line
-- holds on a show with a waiting list are owed to the line, off public sale,
-- until it offers them or passes them on (`PoolShard::returned`).
ALTER TABLE pool_shards ADD COLUMN returned integer NOT NULL DEFAULT 0;
