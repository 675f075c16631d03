package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"unicode/utf8"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// replay runs logged writes again, in log order, in one transaction, and
// commits it with log position upTo (at least the last write's). It runs
// on the writer goroutine, with no transaction open. Each write succeeded
// the first time on the same state, so one that fails now means the log
// and the database do not belong together: replay fails, and commits
// nothing, rather than lose an acknowledged write quietly.
func (s *Store) replay(writes []*loggedWrite, upTo uint64) error {
	if len(writes) == 0 {
		return nil
	}
	ctx := context.Background()
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sqlite: begin replay: %w", err)
	}
	defer s.dropDeferred(0)
	for _, w := range writes {
		// As in a group (commit.go): a claim or a state change sees the
		// records of the sends before it, so they are inserted first.
		if w.apply == nil {
			if err := s.insertDeferred(tx); err != nil {
				_ = tx.Rollback()
				return err
			}
		}
		if err := s.rerun(ctx, tx, w); err != nil {
			_ = tx.Rollback()
			return fmt.Errorf("sqlite: logged write %d failed on replay: %w", w.seq, err)
		}
	}
	prev := s.pt.lastSeq
	s.pt.lastSeq = max(s.pt.lastSeq, upTo, writes[len(writes)-1].seq)
	if err := s.commitTx(tx); err != nil {
		// Not handed out: a later commit recording this position would
		// skip entries of acknowledged writes that were never applied
		// (Open fails, and the next Open must replay them).
		s.pt.lastSeq = prev
		return fmt.Errorf("sqlite: replay: %w", err)
	}
	return nil
}

// rerun runs one logged write's part of a transaction, as the first time.
func (s *Store) rerun(ctx context.Context, tx *sql.Tx, w *loggedWrite) error {
	var err error
	switch {
	case w.apply != nil:
		err = s.applyTx(ctx, tx, w.apply, &store.ApplyResult{})
		if _, repeat := errors.AsType[*store.KeyRepeated](err); repeat {
			// Logged by a binary before 0015, for which a repeat was a
			// write: it wrote nothing new then either (its records
			// existed), and applyTx refuses it before writing anything.
			err = nil
		}
	case w.claim != nil:
		_, err = s.claimTx(ctx, tx, w.claim)
	default:
		_, err = s.updateTx(ctx, tx, w.update)
	}
	return err
}

// recoverLog opens the apply log at Open and applies what it holds beyond
// the database's last commit: the writes acknowledged before a crash. It
// runs on the writer goroutine (a control request), before Open returns.
func (s *Store) recoverLog(ctx context.Context, l *applyLog) error {
	entries, dropped, err := l.readAll()
	if err != nil {
		return err
	}
	if dropped > 0 {
		s.log.Warn("sqlite: apply log ended in a torn or corrupt entry; cut off (never acknowledged, or lost with an OS crash)",
			"bytes", dropped, "entries_before_it", len(entries))
	}
	var applied uint64
	if err := s.w.QueryRowContext(ctx, `SELECT applied FROM apply_log`).Scan(&applied); err != nil {
		return fmt.Errorf("sqlite: read apply log position: %w", err)
	}
	var todo []*loggedWrite
	for i := range entries {
		e := &entries[i]
		if e.seq <= applied {
			continue
		}
		if len(todo) > 0 && e.seq <= todo[len(todo)-1].seq {
			// Remains of an append that failed and was written over; their
			// writes were committed with a later position, or refused.
			s.log.Warn("sqlite: apply log entries out of order; the rest is ignored", "seq", e.seq)
			break
		}
		todo = append(todo, e)
	}
	s.pt.committedSeq, s.pt.lastSeq = applied, applied
	s.applyLog = l
	if len(todo) > 0 {
		if todo[0].seq != applied+1 {
			// The database lost commits the log had already been emptied
			// for: an OS crash with --durability normal. What the log
			// still has is applied; what is in neither is gone.
			s.log.Warn("sqlite: apply log starts after a gap; the writes in the gap are lost",
				"database_at", applied, "log_from", todo[0].seq)
		}
		s.log.Info("sqlite: applying writes acknowledged before the last stop", "writes", len(todo))
		if err := s.replay(todo, todo[len(todo)-1].seq); err != nil {
			s.applyLog = nil
			return fmt.Errorf("%w (the log is kept: start the version that wrote it, or move %s aside to start without the writes it holds)", err, l.f.Name())
		}
	}
	return l.reset()
}

// The entries of the three logged writes, or nil when the log cannot carry
// the write exactly: JSON turns invalid UTF-8 into U+FFFD, so a write with
// such a string (possible only from Go callers; JSON input is valid UTF-8)
// is committed before it is answered instead. changed reports, after the
// write ran, the records it changed (for the overlay).

func applyEntry(p *store.Plan, changed func() []model.Record) *logEntry {
	if !planIsUTF8(p) {
		return nil
	}
	e := newEntry(&loggedWrite{apply: p}, changed)
	if e != nil {
		e.msgID, e.body = p.MsgID, p.MsgBody
		// As writeRecords stores it.
		e.visible = func(r *model.Record) int64 { return r.Delivery.NextRetryAtMS }
	}
	return e
}

func claimEntry(p *store.ClaimParams, changed func() []model.Record) *logEntry {
	ok := utf8.ValidString
	if !ok(p.Owner) || !ok(string(p.Box)) || !ok(string(p.From)) || !ok(string(p.To)) || !ok(p.LeaseID) || !ok(p.Holder) {
		return nil
	}
	// No visible: a claim does not change visible_at_ms (the overlay keeps
	// what it knew), and it leaves the record held, a state no waiting
	// claimer asks Claimable or NextVisible about.
	return newEntry(&loggedWrite{claim: p}, changed)
}

func updateEntry(u *store.Update, changed func() []model.Record) *logEntry {
	ok := utf8.ValidString
	d := &u.Delivery
	if !ok(u.RecordID) || !ok(string(u.From)) || !ok(u.ExpectLeaseID) || !ok(string(u.To)) || !ok(u.EventType) ||
		!ok(u.EventDetail) || !ok(d.ExternalMsgID) || !ok(d.ErrorCode) || !ok(d.ErrorMessage) || !ok(d.LastError) ||
		(u.Lease != nil && (!ok(u.Lease.ID) || !ok(u.Lease.Holder))) ||
		(u.EndsLease != nil && (!ok(u.EndsLease.ID) || !ok(string(u.EndsLease.By)))) ||
		(u.Notice != nil && (!ok(u.Notice.Owner) || !ok(u.Notice.Type) || !ok(u.Notice.Detail))) ||
		(u.Receipt != nil && !receiptIsUTF8(u.Receipt)) {
		return nil
	}
	e := newEntry(&loggedWrite{update: u}, changed)
	if e != nil {
		e.visible = func(*model.Record) int64 { return u.VisibleAtMS }
	}
	return e
}

func receiptIsUTF8(r *model.Receipt) bool {
	ok := utf8.ValidString
	return ok(r.MsgID) && ok(r.Iss) && ok(r.Reader) && ok(r.GroupID) && ok(string(r.Status)) && ok(r.Reason)
}

func newEntry(w *loggedWrite, changed func() []model.Record) *logEntry {
	b, err := w.encode()
	if err != nil {
		return nil
	}
	return &logEntry{payload: b, changed: changed}
}

func planIsUTF8(p *store.Plan) bool {
	ok := utf8.ValidString
	if !ok(p.MsgID) || (p.Idem != nil && (!ok(p.Idem.Scope) || !ok(p.Idem.Key))) {
		return false
	}
	for i := range p.Records {
		r := &p.Records[i]
		d := &r.Delivery
		if !ok(r.RecordID) || !ok(r.Owner) || !ok(string(r.BoxKind)) || !ok(r.MsgID) || !ok(string(r.State)) ||
			!ok(r.ThreadKey) || !ok(d.ExternalMsgID) || !ok(d.ErrorCode) || !ok(d.ErrorMessage) || !ok(d.LastError) {
			return false
		}
		for _, t := range r.Tags {
			if !ok(t) {
				return false
			}
		}
		if rt := r.Route; rt != nil {
			if !ok(rt.TunnelDID) || !ok(rt.Platform) || !ok(rt.AccountID) || !ok(rt.Address) || !ok(rt.ChatID) ||
				!ok(rt.TargetDID) || !ok(rt.Mode) {
				return false
			}
			for k, v := range rt.ExtIDs {
				if !ok(k) || !ok(v) {
					return false
				}
			}
		}
		if l := r.Lease; l != nil && (!ok(l.ID) || !ok(l.Holder)) {
			return false
		}
	}
	return true
}
