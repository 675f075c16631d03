package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store/postgres"
)

const raceMsg = "sha256:0000000000000000000000000000000000000000000000000000000000000abc"

// stored is the receipt the racing transaction of raceFirstInsert stores.
var stored = model.Receipt{MsgID: raceMsg, Iss: "did:agent:a", Reader: "did:agent:a", AtMS: 2000, Status: model.ReceiptReaded}

// raceFirstInsert runs PutReceipt(r) while another transaction holds the
// first receipt of its reader (stored) uncommitted, commits that one once
// PutReceipt waits for it, and returns what PutReceipt answered.
func raceFirstInsert(t *testing.T, s *postgres.Store, r model.Receipt) model.Receipt {
	t.Helper()
	ctx := t.Context()
	tx, err := postgres.Pool(s).Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(context.Background())
	if _, err := tx.Exec(ctx, `INSERT INTO receipts (msg_id, iss, reader, group_id, at_ms, status, reason)
		VALUES ($1, $2, $3, '', $4, $5, '')`, stored.MsgID, stored.Iss, stored.Reader, stored.AtMS, string(stored.Status)); err != nil {
		t.Fatal(err)
	}
	type res struct {
		r   model.Receipt
		err error
	}
	done := make(chan res, 1)
	go func() {
		got, err := s.PutReceipt(ctx, r, r.AtMS)
		done <- res{got, err}
	}()
	waitForLockWait(t, tx) // PutReceipt now waits on the uncommitted insert
	if err := tx.Commit(ctx); err != nil {
		t.Fatal(err)
	}
	got := <-done
	if got.err != nil {
		t.Fatal(got.err)
	}
	return got.r
}

// A receipt older than one another transaction inserts (and commits) while
// PutReceipt waits on it must return the stored (newer) receipt, not a zero
// receipt.
func TestPutReceiptOlderRacingFirstInsert(t *testing.T) {
	s := openStore(t, newSchema(t))
	got := raceFirstInsert(t, s, model.Receipt{MsgID: raceMsg, Iss: "did:agent:a", Reader: "did:agent:a", AtMS: 1000, Status: model.ReceiptReading})
	if got != stored {
		t.Fatalf("PutReceipt of an older receipt returned %+v, want the stored %+v", got, stored)
	}
}

// Two identical first receipts racing: the second waits on the first's
// insert and then finds the same receipt stored. It changed nothing, so it
// writes no receipt.set event (the first one's transaction wrote the only
// one; here the racing insert is bare and writes none).
func TestPutReceiptSameRacingFirstInsert(t *testing.T) {
	s := openStore(t, newSchema(t))
	if got := raceFirstInsert(t, s, stored); got != stored {
		t.Fatalf("PutReceipt of the same receipt returned %+v, want %+v", got, stored)
	}
	var n int
	if err := postgres.Pool(s).QueryRow(t.Context(), "SELECT count(*) FROM events WHERE type = $1", model.EventReceiptSet).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 0 {
		t.Fatalf("%d receipt.set events for a receipt that changed nothing, want 0", n)
	}
}

// waitForLockWait returns once a session waits for tx's transaction to
// end: the race a test sets up (PutReceipt meeting tx's uncommitted
// insert) is then really run. Another test's lock waits do not count.
func waitForLockWait(t *testing.T, tx pgx.Tx) {
	t.Helper()
	var xid string
	if err := tx.QueryRow(t.Context(), "SELECT pg_current_xact_id()::text").Scan(&xid); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		var n int
		err := tx.QueryRow(t.Context(), `SELECT count(*) FROM pg_locks
			WHERE locktype = 'transactionid' AND NOT granted AND transactionid::text = $1`, xid).Scan(&n)
		if err != nil {
			t.Fatal(err)
		}
		if n > 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatal("PutReceipt never waited for the racing insert: the test runs no race")
		}
		time.Sleep(5 * time.Millisecond)
	}
}
