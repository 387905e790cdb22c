-- (PostgreSQL only: fill factors and asynchronous projection commits.)
SELECT 1;
