-- (SQLite only: PostgreSQL has had this index since migration 0007.)
SELECT 1;
