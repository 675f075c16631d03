package core

import (
	"context"
	"errors"
	"fmt"

	"github.com/msgcenter/msgcenter/model"
)

// An empty answer from a box must mean that nothing is there yet, not that
// the caller asked the wrong question. Both checks below run only when a
// read found nothing, so a box with records pays nothing for them.

// noSuchConsumer answers not found for the box of a consumer that does not
// exist (a name mistyped, a consumer deleted or made under another
// owner): its box is empty and nothing will ever come to it, so a worker
// claiming from it would poll for ever without an error. Nil for any
// other box.
func (s *Service) noSuchConsumer(ctx context.Context, owner string, box model.BoxKind) error {
	name, ok := box.ConsumerName()
	if !ok {
		return nil
	}
	_, err := s.st.GetConsumer(ctx, owner, name)
	if errors.Is(err, model.ErrNotFound) {
		return model.NotFound(fmt.Sprintf("consumer %q of %s", name, owner))
	}
	return err
}

// emptySync refuses a sync that found nothing because its cursor is past
// the box's last seq: seqs are never reused (retention keeps a box's last
// one), so such a cursor belongs to another box or another store (a data
// directory reset, a different server), and a client holding it would
// wait for ever for seqs the box has given out already. A cursor at the
// last seq, or a box that has records after it that the caller's filter
// passed over, is answered as usual.
func (s *Service) emptySync(ctx context.Context, owner string, box model.BoxKind, after int64) error {
	if err := s.noSuchConsumer(ctx, owner, box); err != nil {
		return err
	}
	if after == 0 {
		return nil
	}
	last, err := s.st.BoxLastSeq(ctx, owner, box)
	if err != nil {
		return err
	}
	if after > last {
		return model.Invalid("after_seq", fmt.Sprintf("%d is beyond the end of %s's %s, which is at seq %d: the cursor is not this box's (resume from at most %d)", after, owner, box, last, last))
	}
	return nil
}
