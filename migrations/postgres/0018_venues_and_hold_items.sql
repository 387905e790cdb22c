-- Venues: seating charts created once and used by many shows (a reference
-- table when sharded by show, as `shows` is). The definition is the
-- canonical JSON of the chart.
CREATE TABLE venues
(
    venue_id      text   PRIMARY KEY,
    definition    text   NOT NULL,
    created_at_us bigint NOT NULL
);

-- What each unit of a hold costs, fixed when the hold was decided (the
-- prices in its events): a JSON array of items, one per seat or per pool
-- shard's places.
ALTER TABLE holds ADD COLUMN items text NOT NULL DEFAULT '[]';
