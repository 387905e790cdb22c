-- The waiting room (issue #22): a show's room stream and its buyers' queue
-- entries are read in log order by show, past every other event of the
-- onsale (store/log.rs, LogFilter::Queue); the types are the streams'
-- Aggregate::TYPE (domain::waiting_room).
CREATE INDEX events_waiting_room ON events (show_id, position)
    WHERE aggregate_type IN ('WaitingRoom', 'QueueEntry');
