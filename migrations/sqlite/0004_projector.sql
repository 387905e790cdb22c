-- Where each projector has read the log up to (position), moved by
-- compare-and-set. SQLite has one writer, so positions follow commit order.
CREATE TABLE projector_checkpoints
(
    name          text    PRIMARY KEY,
    position      integer NOT NULL,
    updated_at_us integer NOT NULL
) STRICT;
INSERT INTO projector_checkpoints (name, position, updated_at_us) VALUES ('projections', 0, 0);
