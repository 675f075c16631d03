-- 0010: aggregation of inbound bursts into Mails (store/mail.go).
--
-- A bucket is a burst of parts of one mail key; open_key is that key
-- while parts may join it (one open bucket per key) and NULL once it is
-- closed, waiting for its flush. Parts keep their row after the flush,
-- without the body, so a part dispatched again is recognised; retention
-- deletes those with the idempotency keys.
CREATE TABLE mail_buckets (
    bucket_id   BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    open_key    TEXT COLLATE "C" UNIQUE,
    sender      TEXT COLLATE "C" NOT NULL,
    agg_key     TEXT COLLATE "C" NOT NULL,
    recipients  TEXT[] NOT NULL,
    parts       INTEGER NOT NULL,
    cost        BIGINT NOT NULL,
    window_ms   BIGINT NOT NULL,
    max_wait_ms BIGINT NOT NULL,
    first_at_ms BIGINT NOT NULL,
    last_at_ms  BIGINT NOT NULL,
    due_at_ms   BIGINT NOT NULL
);
CREATE INDEX mail_buckets_due ON mail_buckets (due_at_ms, bucket_id);
CREATE INDEX mail_buckets_sender ON mail_buckets (sender, due_at_ms, bucket_id);

CREATE TABLE mail_parts (
    mail_key      TEXT COLLATE "C" NOT NULL,
    msg_id        TEXT COLLATE "C" NOT NULL,
    bucket_id     BIGINT,
    pos           INTEGER NOT NULL,
    body          BYTEA,
    ctx           BYTEA,
    created_at_ms BIGINT NOT NULL,
    mail_id       TEXT COLLATE "C",
    PRIMARY KEY (mail_key, msg_id)
);
CREATE INDEX mail_parts_bucket ON mail_parts (bucket_id, pos) WHERE bucket_id IS NOT NULL;
CREATE INDEX mail_parts_flushed ON mail_parts (created_at_ms) WHERE bucket_id IS NULL;
