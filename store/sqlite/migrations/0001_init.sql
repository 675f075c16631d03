-- 0001: the initial schema.
--
-- Empty strings and zeros rather than NULLs wherever "absent" has no other
-- meaning: they cost no more space and keep scans free of NULL handling.
-- The lease columns are the exception: lease_until_ms IS NULL is what keeps
-- a record out of the partial lease index the reaper scans.

-- A rowid table: bodies are large (typically around 1 KiB, up to 1 MiB),
-- and in a WITHOUT ROWID b-tree keyed by a random hash only a few fit per
-- page, so pages split on most inserts (measured: more WAL pages per 1 KiB
-- dispatch than with the rowid table and its msg_id index).
CREATE TABLE messages (
    msg_id        TEXT    PRIMARY KEY,
    body          BLOB    NOT NULL,
    created_at_ms INTEGER NOT NULL
) STRICT;

CREATE TABLE records (
    record_id        TEXT    PRIMARY KEY,
    owner            TEXT    NOT NULL,
    box              TEXT    NOT NULL,
    msg_id           TEXT    NOT NULL,
    state            TEXT    NOT NULL,
    seq              INTEGER NOT NULL,
    created_at_ms    INTEGER NOT NULL,
    updated_at_ms    INTEGER NOT NULL,
    sort_key         INTEGER NOT NULL,
    thread_key       TEXT    NOT NULL DEFAULT '',
    tags             TEXT,
    route            TEXT,
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_retry_at_ms INTEGER NOT NULL DEFAULT 0,
    external_msg_id  TEXT    NOT NULL DEFAULT '',
    delivered_at_ms  INTEGER NOT NULL DEFAULT 0,
    error_code       TEXT    NOT NULL DEFAULT '',
    error_message    TEXT    NOT NULL DEFAULT '',
    retry_after_ms   INTEGER NOT NULL DEFAULT 0,
    last_error       TEXT    NOT NULL DEFAULT '',
    visible_at_ms    INTEGER NOT NULL DEFAULT 0,
    lease_id         TEXT,
    lease_holder     TEXT,
    lease_until_ms   INTEGER
) STRICT;

-- The box as a log: sync by seq, and the guard against a seq handed out twice.
CREATE UNIQUE INDEX records_box_seq ON records (owner, box, seq);
-- Claims walk one state of one box in seq order; carrying visible_at_ms in
-- the index lets records in backoff be skipped without reading the table.
CREATE INDEX records_box_state ON records (owner, box, state, seq, visible_at_ms);
-- Time-ordered paging with a (sort_key, record_id) cursor.
CREATE INDEX records_box_sort ON records (owner, box, sort_key, record_id);
-- The lease reaper looks only at held records.
CREATE INDEX records_lease ON records (lease_until_ms) WHERE lease_until_ms IS NOT NULL;
-- "Does this DID own a record of this message?"
CREATE INDEX records_msg ON records (msg_id, owner);

CREATE TABLE box_seqs (
    owner    TEXT    NOT NULL,
    box      TEXT    NOT NULL,
    last_seq INTEGER NOT NULL,
    PRIMARY KEY (owner, box)
) STRICT, WITHOUT ROWID;

-- AUTOINCREMENT so an event id is never reused, even after retention deleted
-- the newest rows: consumers page the log by id.
CREATE TABLE events (
    event_id   INTEGER PRIMARY KEY AUTOINCREMENT,
    type       TEXT    NOT NULL,
    owner      TEXT    NOT NULL DEFAULT '',
    box        TEXT    NOT NULL DEFAULT '',
    record_id  TEXT    NOT NULL DEFAULT '',
    msg_id     TEXT    NOT NULL DEFAULT '',
    from_state TEXT    NOT NULL DEFAULT '',
    to_state   TEXT    NOT NULL DEFAULT '',
    at_ms      INTEGER NOT NULL,
    detail     TEXT    NOT NULL DEFAULT ''
) STRICT;
CREATE INDEX events_owner ON events (owner, event_id);

CREATE TABLE conversations (
    owner          TEXT    NOT NULL,
    thread_key     TEXT    NOT NULL,
    last_msg_id    TEXT    NOT NULL,
    last_record_id TEXT    NOT NULL,
    last_box       TEXT    NOT NULL,
    last_seq       INTEGER NOT NULL,
    unread_count   INTEGER NOT NULL DEFAULT 0,
    updated_at_ms  INTEGER NOT NULL,
    PRIMARY KEY (owner, thread_key)
) STRICT, WITHOUT ROWID;
-- Matches ListConversations' ORDER BY exactly, so no sort step.
CREATE INDEX conversations_recent ON conversations (owner, updated_at_ms DESC, thread_key);

CREATE TABLE groups (
    group_did     TEXT    PRIMARY KEY,
    updated_at_ms INTEGER NOT NULL
) STRICT, WITHOUT ROWID;

CREATE TABLE group_subscribers (
    group_did  TEXT NOT NULL,
    subscriber TEXT NOT NULL,
    PRIMARY KEY (group_did, subscriber)
) STRICT, WITHOUT ROWID;

CREATE TABLE blocks (
    owner   TEXT    NOT NULL,
    blocked TEXT    NOT NULL,
    at_ms   INTEGER NOT NULL,
    PRIMARY KEY (owner, blocked)
) STRICT, WITHOUT ROWID;

CREATE TABLE routes (
    did        TEXT    NOT NULL,
    idx        INTEGER NOT NULL,
    tunnel_did TEXT    NOT NULL,
    address    TEXT    NOT NULL DEFAULT '',
    platform   TEXT    NOT NULL DEFAULT '',
    chat_id    TEXT    NOT NULL DEFAULT '',
    account_id TEXT    NOT NULL DEFAULT '',
    mode       TEXT    NOT NULL DEFAULT '',
    priority   INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (did, idx)
) STRICT, WITHOUT ROWID;

CREATE TABLE receipts (
    msg_id   TEXT    NOT NULL,
    reader   TEXT    NOT NULL,
    group_id TEXT    NOT NULL DEFAULT '',
    iss      TEXT    NOT NULL DEFAULT '',
    at_ms    INTEGER NOT NULL,
    status   TEXT    NOT NULL,
    reason   TEXT    NOT NULL DEFAULT '',
    PRIMARY KEY (msg_id, reader)
) STRICT, WITHOUT ROWID;
CREATE INDEX receipts_group ON receipts (group_id, reader, msg_id);
CREATE INDEX receipts_reader ON receipts (reader, msg_id);

-- AUTOINCREMENT so a consumed entry's id is never handed to a new entry: a
-- late Apply that consumes the old id must conflict, not eat the new one.
CREATE TABLE scheduled (
    sched_id      INTEGER PRIMARY KEY AUTOINCREMENT,
    op            TEXT    NOT NULL,
    msg_id        TEXT    NOT NULL,
    ctx           BLOB,
    due_at_ms     INTEGER NOT NULL,
    created_at_ms INTEGER NOT NULL,
    UNIQUE (op, msg_id)
) STRICT;
CREATE INDEX scheduled_due ON scheduled (due_at_ms, sched_id);

-- pos keeps the recipients in the order the sender listed them.
CREATE TABLE scheduled_recipients (
    sched_id INTEGER NOT NULL,
    pos      INTEGER NOT NULL,
    did      TEXT    NOT NULL,
    PRIMARY KEY (sched_id, pos)
) STRICT, WITHOUT ROWID;
CREATE INDEX scheduled_recipients_did ON scheduled_recipients (did, sched_id);

CREATE TABLE idempotency (
    scope         TEXT    NOT NULL,
    key           TEXT    NOT NULL,
    msg_id        TEXT    NOT NULL,
    created_at_ms INTEGER NOT NULL,
    PRIMARY KEY (scope, key)
) STRICT, WITHOUT ROWID;

CREATE TABLE tokens (
    hash          TEXT    PRIMARY KEY,
    did           TEXT    NOT NULL,
    role          TEXT    NOT NULL,
    created_at_ms INTEGER NOT NULL
) STRICT, WITHOUT ROWID;
