package core

import (
	"context"
	"errors"
	"strings"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
)

// A reply that names no topic continues its parent's: answering a message
// in "dm:did:bob/topic:launch" without repeating the topic would otherwise
// start a second conversation with bob, which is not what a person or an
// agent replying in a thread means. The message itself is not changed (its
// id is its content); only its records' thread keys carry the topic.
//
// The topic is inherited only when the reply's author may read the parent
// (CanReadMessage): a message id is enough to name a parent, and the topic
// of a conversation one is not part of is not the author's to learn, nor
// to put in the thread keys of the reply's recipients.
//
// A parent that inherited its own topic carries it in its records' keys,
// not in its body, so the topic is read from the author's record of the
// parent (or its group's), one lookup whatever the depth of the thread.

// replyTopic returns the topic c's message continues, "" for none.
func (s *Service) replyTopic(ctx context.Context, m *message.Message) (string, error) {
	if m.Thread == nil || m.Thread.ReplyTo == "" || m.Thread.Topic != "" {
		return "", nil
	}
	parentID, author := m.Thread.ReplyTo, m.LogicalSender()
	if author == "" {
		return "", nil
	}
	ok, err := s.st.CanReadMessage(ctx, author, parentID)
	if err != nil || !ok {
		return "", err
	}
	body, err := s.st.GetMessage(ctx, parentID)
	if errors.Is(err, model.ErrNotFound) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	parent, err := message.Decode(body)
	if err != nil {
		// Stored messages were validated on the way in; one that no
		// longer decodes is no reason to refuse the reply.
		s.log.Warn("core: a reply's parent does not decode; no topic inherited", "msg_id", parentID, "err", err)
		return "", nil
	}
	if parent.Thread != nil && parent.Thread.Topic != "" {
		return parent.Thread.Topic, nil
	}
	if parent.Thread == nil || parent.Thread.ReplyTo == "" {
		return "", nil // a parent that starts its conversation without a topic
	}
	return s.inheritedTopic(ctx, parent, parentID, author)
}

// inheritedTopic reads the topic a reply (parent) inherited from the
// thread key of a record of it that author can see: its own INBOX or
// OUTBOX copy, or the group's copy. The key's start is worked out from
// the parent as threadKey does, so whatever a DID or topic contains, the
// rest is the topic.
func (s *Service) inheritedTopic(ctx context.Context, parent *message.Message, parentID, author string) (string, error) {
	pc := &checked{msg: parent, id: parentID}
	type copyOf struct {
		owner string
		box   model.BoxKind
		base  func() string
	}
	dm := func(owner string) func() string { return func() string { return pc.dmThreadKey(owner) } }
	copies := []copyOf{
		{author, model.Inbox, dm(author)},
		{author, model.Outbox, dm(author)},
	}
	if parent.Source != "" && parent.From != "" {
		group := func() string { return "group:" + parent.From }
		copies = append(copies, copyOf{parent.From, model.GroupInbox, group}, copyOf{author, model.Inbox, group})
	}
	for _, cp := range copies {
		rec, err := s.st.GetRecord(ctx, model.RecordID(cp.owner, cp.box, parentID, ""))
		if errors.Is(err, model.ErrNotFound) {
			continue
		}
		if err != nil {
			return "", err
		}
		if t, ok := strings.CutPrefix(rec.ThreadKey, cp.base()+topicMark); ok && t != "" {
			return t, nil
		}
	}
	return "", nil
}
