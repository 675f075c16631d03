package core

import (
	"context"
	"fmt"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
	"github.com/msgcenter/msgcenter/wire"
)

// maxReadConversation bounds the records one ReadConversation reads; More
// says to call again.
const maxReadConversation = 5_000

// ReadConversation marks an owner's conversation read, seed 004's "mark
// read" and "clear a conversation": every UNREAD record of the thread in
// the owner's INBOX (up to up_to_seq when given) becomes READED. Each is a
// state change of its own, as one made by hand (its event, the unread
// count, a group member's receipt), so a record claimed or read meanwhile
// is passed over, not overwritten.
func (s *Service) ReadConversation(ctx context.Context, who model.Identity, owner string, req *wire.ReadConversationRequest) (*wire.ReadConversationResult, error) {
	if err := message.CheckDID("owner", owner, true); err != nil {
		return nil, err
	}
	if err := canAct(who, owner); err != nil {
		return nil, err
	}
	if req.ThreadKey == "" {
		return nil, model.Invalid("thread_key", "is required: the conversation's key, as conversations lists it")
	}
	if req.UpToSeq < 0 {
		return nil, model.Invalid("up_to_seq", "must not be negative (0: the whole conversation)")
	}
	res := &wire.ReadConversationResult{}
	for after := int64(0); ; {
		recs, err := s.st.Sync(ctx, store.SyncParams{Owner: owner, Box: model.Inbox, AfterSeq: after, Limit: 500,
			ThreadKey: req.ThreadKey, States: []model.State{model.Unread}})
		if err != nil {
			return nil, err
		}
		for _, rec := range recs {
			if req.UpToSeq > 0 && rec.Seq > req.UpToSeq {
				return res, nil
			}
			if res.Read == maxReadConversation {
				res.More = true
				return res, nil
			}
			read, err := s.readUnread(ctx, rec, s.nowMS(), "conversation read")
			if err != nil {
				return nil, fmt.Errorf("read %s: %w", rec.RecordID, err)
			}
			if read {
				res.Read++
			}
			after = rec.Seq
		}
		if len(recs) < 500 {
			return res, nil
		}
	}
}
