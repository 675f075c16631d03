-- 0011: aggregation of inbound bursts into Mails (store/mail.go).
--
-- A bucket is a burst of parts of one mail key; open_key is that key
-- while parts may join it (one open bucket per key) and NULL once it is
-- closed, waiting for its flush. Parts keep their row after the flush,
-- without the body, so a part dispatched again is recognised; retention
-- deletes those with the idempotency keys.
CREATE TABLE mail_buckets (
    bucket_id   INTEGER PRIMARY KEY AUTOINCREMENT,
    open_key    TEXT UNIQUE,
    sender      TEXT    NOT NULL,
    agg_key     TEXT    NOT NULL,
    recipients  TEXT    NOT NULL, -- JSON array
    parts       INTEGER NOT NULL,
    cost        INTEGER NOT NULL,
    window_ms   INTEGER NOT NULL,
    max_wait_ms INTEGER NOT NULL,
    first_at_ms INTEGER NOT NULL,
    last_at_ms  INTEGER NOT NULL,
    due_at_ms   INTEGER NOT NULL
) STRICT;
CREATE INDEX mail_buckets_due ON mail_buckets (due_at_ms, bucket_id);
CREATE INDEX mail_buckets_sender ON mail_buckets (sender, due_at_ms, bucket_id);

CREATE TABLE mail_parts (
    mail_key      TEXT    NOT NULL,
    msg_id        TEXT    NOT NULL,
    bucket_id     INTEGER,          -- NULL once flushed
    pos           INTEGER NOT NULL,
    body          BLOB,             -- NULL once flushed
    ctx           BLOB,
    created_at_ms INTEGER NOT NULL,
    mail_id       TEXT,             -- the Mail it went into, once flushed
    PRIMARY KEY (mail_key, msg_id)
) STRICT, WITHOUT ROWID;
CREATE INDEX mail_parts_bucket ON mail_parts (bucket_id, pos) WHERE bucket_id IS NOT NULL;
CREATE INDEX mail_parts_flushed ON mail_parts (created_at_ms) WHERE bucket_id IS NULL;
