-- A hold is on seats (hold_seats) or on places of one pool (pool_holds).
ALTER TABLE holds ADD COLUMN pool_id text;

-- Pool shards: capacity from the show, sold from the shard's stream
-- (guarded by last_seq).
CREATE TABLE pool_shards
(
    show_id  text    NOT NULL,
    pool_id  text    NOT NULL,
    shard    integer NOT NULL,
    capacity integer NOT NULL,
    sold     integer NOT NULL DEFAULT 0,
    last_seq integer  NOT NULL DEFAULT 0,
    PRIMARY KEY (show_id, pool_id, shard)
) STRICT;

-- The part of a pool hold each shard holds. Held places are counted at query
-- time with expires_at_us > now, so expiry needs no write.
CREATE TABLE pool_holds
(
    hold_id       text    NOT NULL,
    show_id       text    NOT NULL,
    pool_id       text    NOT NULL,
    shard         integer NOT NULL,
    quantity      integer NOT NULL,
    expires_at_us integer  NOT NULL,
    state         text    NOT NULL,
    PRIMARY KEY (hold_id, shard)
) STRICT;
CREATE INDEX pool_holds_live ON pool_holds (show_id, pool_id, expires_at_us) WHERE state = 'held';
