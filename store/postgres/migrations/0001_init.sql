-- 0001: the initial schema, the PostgreSQL twin of store/sqlite's 0001.
--
-- Every text column is COLLATE "C": ids, DIDs and states are compared and
-- ordered byte by byte, as SQLite does, whatever locale the database was
-- created with (a linguistic collation would order keyset cursors
-- differently and make every index comparison slower).
--
-- Empty strings and zeros rather than NULLs wherever "absent" has no other
-- meaning. The lease columns are the exception: lease_until_ms IS NULL is
-- what keeps a record out of the partial lease index the reaper scans.

-- Bodies are BYTEA, never jsonb: a message id is the hash of its canonical
-- bytes, and jsonb would reorder keys and reformat them.
CREATE TABLE messages (
    msg_id        TEXT COLLATE "C" PRIMARY KEY,
    body          BYTEA  NOT NULL,
    created_at_ms BIGINT NOT NULL
);

-- tags and route are JSON text, decoded by the driver; the tag filter casts
-- tags to jsonb. Text keeps the bytes the core wrote.
CREATE TABLE records (
    record_id        TEXT COLLATE "C" PRIMARY KEY,
    owner            TEXT COLLATE "C" NOT NULL,
    box              TEXT COLLATE "C" NOT NULL,
    msg_id           TEXT COLLATE "C" NOT NULL,
    state            TEXT COLLATE "C" NOT NULL,
    seq              BIGINT  NOT NULL,
    created_at_ms    BIGINT  NOT NULL,
    updated_at_ms    BIGINT  NOT NULL,
    sort_key         BIGINT  NOT NULL,
    thread_key       TEXT COLLATE "C" NOT NULL DEFAULT '',
    tags             TEXT,
    route            TEXT,
    attempts         INTEGER NOT NULL DEFAULT 0,
    next_retry_at_ms BIGINT  NOT NULL DEFAULT 0,
    external_msg_id  TEXT    NOT NULL DEFAULT '',
    delivered_at_ms  BIGINT  NOT NULL DEFAULT 0,
    error_code       TEXT    NOT NULL DEFAULT '',
    error_message    TEXT    NOT NULL DEFAULT '',
    retry_after_ms   BIGINT  NOT NULL DEFAULT 0,
    last_error       TEXT    NOT NULL DEFAULT '',
    visible_at_ms    BIGINT  NOT NULL DEFAULT 0,
    lease_id         TEXT COLLATE "C",
    lease_holder     TEXT,
    lease_until_ms   BIGINT
);

-- The box as a log: sync by seq, and the guard against a seq handed out twice.
CREATE UNIQUE INDEX records_box_seq ON records (owner, box, seq);
-- Claims walk one state of one box in seq order; carrying visible_at_ms in
-- the index lets records in backoff be skipped without reading the heap.
CREATE INDEX records_box_state ON records (owner, box, state, seq, visible_at_ms);
-- Time-ordered paging with a (sort_key, record_id) cursor.
CREATE INDEX records_box_sort ON records (owner, box, sort_key, record_id);
-- The lease reaper looks only at held records.
CREATE INDEX records_lease ON records (lease_until_ms) WHERE lease_until_ms IS NOT NULL;
-- "Does this DID own a record of this message?"
CREATE INDEX records_msg ON records (msg_id, owner);

-- One counter row per box. Apply locks it (INSERT ... ON CONFLICT DO
-- UPDATE) before inserting the box's records and keeps the lock until
-- commit, so seqs of one box are handed out and committed in the same
-- order: a reader syncing "after seq N" can never miss a lower seq that
-- commits later.
CREATE TABLE box_seqs (
    owner    TEXT COLLATE "C" NOT NULL,
    box      TEXT COLLATE "C" NOT NULL,
    last_seq BIGINT NOT NULL,
    PRIMARY KEY (owner, box)
);

-- An identity column: ids come from a sequence and are never reused, even
-- after retention deleted the newest rows; consumers page the log by id.
CREATE TABLE events (
    event_id   BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    type       TEXT COLLATE "C" NOT NULL,
    owner      TEXT COLLATE "C" NOT NULL DEFAULT '',
    box        TEXT COLLATE "C" NOT NULL DEFAULT '',
    record_id  TEXT COLLATE "C" NOT NULL DEFAULT '',
    msg_id     TEXT COLLATE "C" NOT NULL DEFAULT '',
    from_state TEXT COLLATE "C" NOT NULL DEFAULT '',
    to_state   TEXT COLLATE "C" NOT NULL DEFAULT '',
    at_ms      BIGINT NOT NULL,
    detail     TEXT   NOT NULL DEFAULT ''
);
CREATE INDEX events_owner ON events (owner, event_id);

CREATE TABLE conversations (
    owner          TEXT COLLATE "C" NOT NULL,
    thread_key     TEXT COLLATE "C" NOT NULL,
    last_msg_id    TEXT COLLATE "C" NOT NULL,
    last_record_id TEXT COLLATE "C" NOT NULL,
    last_box       TEXT COLLATE "C" NOT NULL,
    last_seq       BIGINT NOT NULL,
    unread_count   BIGINT NOT NULL DEFAULT 0,
    updated_at_ms  BIGINT NOT NULL,
    PRIMARY KEY (owner, thread_key)
);
-- Matches ListConversations' ORDER BY exactly, so no sort step.
CREATE INDEX conversations_recent ON conversations (owner, updated_at_ms DESC, thread_key);

CREATE TABLE groups (
    group_did     TEXT COLLATE "C" PRIMARY KEY,
    updated_at_ms BIGINT NOT NULL
);

CREATE TABLE group_subscribers (
    group_did  TEXT COLLATE "C" NOT NULL,
    subscriber TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (group_did, subscriber)
);

CREATE TABLE blocks (
    owner   TEXT COLLATE "C" NOT NULL,
    blocked TEXT COLLATE "C" NOT NULL,
    at_ms   BIGINT NOT NULL,
    PRIMARY KEY (owner, blocked)
);

CREATE TABLE routes (
    did        TEXT COLLATE "C" NOT NULL,
    idx        INTEGER NOT NULL,
    tunnel_did TEXT    NOT NULL,
    address    TEXT    NOT NULL DEFAULT '',
    platform   TEXT    NOT NULL DEFAULT '',
    chat_id    TEXT    NOT NULL DEFAULT '',
    account_id TEXT    NOT NULL DEFAULT '',
    mode       TEXT    NOT NULL DEFAULT '',
    priority   INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (did, idx)
);

CREATE TABLE receipts (
    msg_id   TEXT COLLATE "C" NOT NULL,
    reader   TEXT COLLATE "C" NOT NULL,
    group_id TEXT COLLATE "C" NOT NULL DEFAULT '',
    iss      TEXT   NOT NULL DEFAULT '',
    at_ms    BIGINT NOT NULL,
    status   TEXT   NOT NULL,
    reason   TEXT   NOT NULL DEFAULT '',
    PRIMARY KEY (msg_id, reader)
);
CREATE INDEX receipts_group ON receipts (group_id, reader, msg_id);
CREATE INDEX receipts_reader ON receipts (reader, msg_id);

-- An identity column so a consumed entry's id is never handed to a new
-- entry: a late Apply that consumes the old id must conflict, not eat the
-- new one.
CREATE TABLE scheduled (
    sched_id      BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    op            TEXT COLLATE "C" NOT NULL,
    msg_id        TEXT COLLATE "C" NOT NULL,
    ctx           BYTEA,
    due_at_ms     BIGINT NOT NULL,
    created_at_ms BIGINT NOT NULL,
    UNIQUE (op, msg_id)
);
CREATE INDEX scheduled_due ON scheduled (due_at_ms, sched_id);

-- pos keeps the recipients in the order the sender listed them.
CREATE TABLE scheduled_recipients (
    sched_id BIGINT  NOT NULL,
    pos      INTEGER NOT NULL,
    did      TEXT COLLATE "C" NOT NULL,
    PRIMARY KEY (sched_id, pos)
);
CREATE INDEX scheduled_recipients_did ON scheduled_recipients (did, sched_id);

CREATE TABLE idempotency (
    scope         TEXT COLLATE "C" NOT NULL,
    key           TEXT COLLATE "C" NOT NULL,
    msg_id        TEXT COLLATE "C" NOT NULL,
    created_at_ms BIGINT NOT NULL,
    PRIMARY KEY (scope, key)
);

CREATE TABLE tokens (
    hash          TEXT COLLATE "C" PRIMARY KEY,
    did           TEXT COLLATE "C" NOT NULL,
    role          TEXT   NOT NULL,
    created_at_ms BIGINT NOT NULL
);
