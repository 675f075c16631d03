package postgres

import (
	"context"
	"errors"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// UpdateThenClaim is a worker's ack and the claim of its next record in one
// transaction, so one commit (one WAL flush) where the two calls make two,
// in two round trips: BEGIN with the update, then, if the update matched,
// the claim with COMMIT. The claim is a statement after the update's, so it
// sees the update (a record the update gives back is claimable to it).
//
// When that transaction fails as a whole and the server said so (a
// deadlock, a refused statement), nothing of it is committed and the two
// calls run one after the other, each retried as always. A connection lost
// during the COMMIT leaves the outcome unknown, as for any write whose
// answer is lost, and is returned as the update's error.
func (s *Store) UpdateThenClaim(ctx context.Context, u *store.Update, p store.ClaimParams) (model.Record, store.Claimed, error) {
	rec, next, claimErr, done, err := s.updateClaimTx(ctx, u, &p)
	if !done {
		if rec, err = s.Update(ctx, u); err != nil {
			return rec, store.Claimed{}, err
		}
		var c store.Claimed
		c.Record, c.Err = s.Claim(ctx, p)
		return rec, c, nil
	}
	if rec, err = s.updated(ctx, u, rec, err); err != nil {
		return rec, store.Claimed{}, err
	}
	c := store.Claimed{Record: next, Err: claimErr}
	if claimErr == nil && next.RecordID == "" {
		c.Err = model.NotFound("claimable record")
	}
	return rec, c, nil
}

// rollbackWithin bounds the ROLLBACK that ends a failed transaction: a
// server that stops answering must not hold the request for good.
const rollbackWithin = 5 * time.Second

// updateClaimTx runs the transaction. done is false when nothing of it was
// committed for a reason other than the update matching nothing; then the
// other results mean nothing. With done, err is the update's statement's
// (pgx.ErrNoRows: it matched nothing, and nothing was written, or an error
// that leaves open whether the COMMIT happened), next the claimed record,
// zero if none was claimable, and claimErr set when both committed but the
// claimed record could not be read back.
func (s *Store) updateClaimTx(ctx context.Context, u *store.Update, p *store.ClaimParams) (rec, next model.Record, claimErr error, done bool, err error) {
	conn, err := s.pool.Acquire(ctx)
	if err != nil {
		return rec, next, nil, false, nil
	}
	defer conn.Release()
	// end rolls back whatever is open, so that the pool keeps the
	// connection instead of closing it for being in a transaction. A broken
	// connection fails here too, and the pool drops it.
	end := func() {
		rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), rollbackWithin)
		defer cancel()
		if _, err := conn.Exec(rctx, "ROLLBACK"); err != nil {
			s.log.Debug("postgres: rollback of an ack with its next claim", "err", err)
		}
	}

	b := &pgx.Batch{}
	b.Queue("BEGIN")
	b.Queue(sqlUpdate, updateArgs(u)...)
	br := conn.SendBatch(ctx, b)
	_, err = br.Exec()
	if err == nil {
		rec, err = scanRecord(br.QueryRow())
	}
	if cerr := br.Close(); err == nil {
		err = cerr
	}
	if errors.Is(err, pgx.ErrNoRows) {
		end()
		return rec, next, nil, true, err
	}
	if err != nil {
		end()
		return rec, next, nil, false, nil
	}

	b = &pgx.Batch{}
	b.Queue(sqlClaim, claimArgs(p)...)
	b.Queue("COMMIT")
	br = conn.SendBatch(ctx, b)
	next, cerr := scanRecord(br.QueryRow())
	tag, err := br.Exec()
	// Once the COMMIT's answer is read, what Close reports (a FATAL error
	// as the session ends) came after it.
	committed := err == nil && tag.String() == "COMMIT"
	if closeErr := br.Close(); err == nil && !committed {
		err = closeErr
	}
	claimFailed := cerr != nil && !errors.Is(cerr, pgx.ErrNoRows)
	// The server's refusal of the claim or of the COMMIT is definite;
	// anything else (a broken connection, a cancelled context, a FATAL
	// error as the session ends) leaves it open whether the COMMIT
	// happened.
	definite := func(e error) bool {
		var pe *pgconn.PgError
		return errors.As(e, &pe)
	}
	refused := func(e error) bool {
		var pe *pgconn.PgError
		return errors.As(e, &pe) && pe.Severity == "ERROR"
	}
	switch {
	case committed && claimFailed:
		// Both are in, but the claimed record did not read back: as for a
		// claim whose answer was lost.
		return rec, model.Record{}, fail("claim", cerr), true, nil
	case committed:
		if cerr != nil {
			next = model.Record{} // nothing was claimable
		}
		return rec, next, nil, true, nil
	case (claimFailed && definite(cerr)) || refused(err) || err == nil:
		// Refused (err == nil: the COMMIT answered ROLLBACK, after a
		// failed claim): nothing is committed.
		end()
		return rec, next, nil, false, nil
	default:
		end()
		return rec, model.Record{}, nil, true, err
	}
}
