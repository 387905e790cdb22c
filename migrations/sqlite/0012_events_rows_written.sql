-- Whether the append that wrote an event wrote the read-model rows it
-- produces, in the same transaction (issue #15; see the PostgreSQL
-- migration 0014): the projector passes over such events instead of
-- applying them a second time. 0 for events written any other way.
ALTER TABLE events ADD COLUMN rows_written INTEGER NOT NULL DEFAULT 0;
