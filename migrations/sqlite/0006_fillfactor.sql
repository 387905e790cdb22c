-- (PostgreSQL only: fill factors.)
SELECT 1;
