-- 0004: how a group delivers its messages (model.GroupDelivery): a record
-- in every subscriber's INBOX ('members', what every group did before), or
-- once in the group's GROUP_INBOX ('group').
ALTER TABLE groups ADD COLUMN delivery TEXT NOT NULL DEFAULT 'members'
    CHECK (delivery IN ('members', 'group'));
