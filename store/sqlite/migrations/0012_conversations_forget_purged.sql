-- 0012: a conversation does not point at a record that is gone.
--
-- A conversation names its last message and record. Retention (or a
-- consumer's deletion) removes finished records, and the conversation
-- then named a record and, usually, a message that no longer existed, so
-- a client following it got "not found". Now the record's deletion
-- clears the two names (the thread, its last seq, unread count and time
-- stay): an empty last_record_id says the last message was removed.
-- Conversations that lost their last record before this migration keep
-- naming it: finding them means a lookup per conversation, and those
-- named under record ids older than 0005's are not found by their id.
--
-- Like records_keep_seq (0006), this trigger must see every deletion: a
-- migration that rebuilds records must create it again.
CREATE TRIGGER records_leave_conversation AFTER DELETE ON records
WHEN OLD.thread_key <> '' BEGIN
    UPDATE conversations SET last_record_id = '', last_msg_id = ''
        WHERE owner = OLD.owner AND thread_key = OLD.thread_key AND last_record_id = OLD.record_id;
END;
