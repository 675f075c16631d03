-- 0005: unread counts that acks do not lock.
--
-- A conversation's unread_count was one row that every send raised and
-- every ack (or fail) of an unread record lowered. Sends and acks of one
-- inbox then queued on that row lock, each behind the other's WAL flush,
-- and acks could not share a transaction without deadlocking with sends
-- (docs/benchmarks.md, twentieth round). Sends still raise the row (they
-- rewrite it anyway, as its last record); a change that lowers or raises
-- the count now appends its delta here instead, which locks nothing. A
-- conversation's count is its row's plus its deltas, read in one snapshot
-- (ListConversations), and a background pass folds deltas into the row
-- (unread.go), skipping rows a send holds, so it never waits either.
CREATE TABLE conversation_unread (
    owner      TEXT COLLATE "C" NOT NULL,
    thread_key TEXT COLLATE "C" NOT NULL,
    delta      BIGINT NOT NULL
);
CREATE INDEX conversation_unread_thread ON conversation_unread (owner, thread_key);
