package core

import (
	"context"
	"errors"
	"time"

	"github.com/msgcenter/msgcenter/model"
)

const reapBatch = 256

// runReaper returns records whose lease expired: the attempt counts as
// failed, and the record waits for its backoff or goes DEAD. The loop sleeps
// until the earliest lease expiry and is kicked by claims that expire
// sooner.
func (s *Service) runReaper(ctx context.Context) {
	for {
		n, err := s.ReapExpired(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Error("reap expired leases", "err", err)
		}
		if ctx.Err() != nil {
			return
		}
		if n >= reapBatch && err == nil {
			continue
		}
		wait := s.cfg.IdleRecheck
		if at, ok, err := s.st.NextLeaseExpiry(ctx); err == nil && ok {
			if d := time.Duration(at-s.nowMS()) * time.Millisecond; d < wait {
				wait = max(d, 0)
			}
		}
		s.reaperAt.set(s.nowMS() + wait.Milliseconds())
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-s.reaperKick:
		case <-t.C:
		}
		t.Stop()
	}
}

// ReapExpired returns one batch of records whose lease has expired and
// says how many it returned. Each return is a compare-and-set on the
// expired lease, so several reapers (or nodes) never return one twice.
func (s *Service) ReapExpired(ctx context.Context) (int, error) {
	recs, err := s.st.ExpiredLeases(ctx, s.nowMS(), reapBatch)
	if err != nil {
		return 0, err
	}
	n := 0
	for _, r := range recs {
		if r.Lease == nil {
			continue
		}
		f := failure{retryable: true, code: "lease_expired", msg: "the lease expired before an ack"}
		_, err := s.fail(ctx, r, r.Lease.ID, false, f, model.EventLeaseExpired, nil)
		switch {
		case err == nil:
			n++
			s.cfg.Metrics.LeaseExpired(r.BoxKind)
		case errors.Is(err, model.ErrConflict), errors.Is(err, model.ErrLeaseLost):
		default:
			return n, err
		}
	}
	return n, nil
}
