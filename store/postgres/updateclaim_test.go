package postgres_test

import (
	"errors"
	"testing"

	"github.com/jackc/pgx/v5"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
	"github.com/msgcenter/msgcenter/store/postgres"
)

// TestAckStandsWhenItsNextClaimIsRefused: UpdateThenClaim's transaction
// fails at the claim (a trigger refuses the claim's event), so nothing of
// it is committed; the ack then runs on its own and stands, the claim's
// error is reported with it, and the next record is still there to claim.
func TestAckStandsWhenItsNextClaimIsRefused(t *testing.T) {
	schema := newSchema(t)
	s := openStore(t, schema)
	ctx := t.Context()
	const owner = "did:test:boom"
	recs, held, claim := heldInbox(t, s, owner, "refused-1", "refused-2")
	ddl := "CREATE FUNCTION " + pgx.Identifier{schema, "refuse_claims"}.Sanitize() + `() RETURNS trigger LANGUAGE plpgsql AS $$
		BEGIN RAISE EXCEPTION 'claims refused'; END $$;
		CREATE TRIGGER refuse_claims BEFORE INSERT ON ` + pgx.Identifier{schema, "events"}.Sanitize() + `
		FOR EACH ROW WHEN (NEW.type = '` + model.EventRecordClaimed + `') EXECUTE FUNCTION ` + pgx.Identifier{schema, "refuse_claims"}.Sanitize() + `()`
	if _, err := adminPool(t).Exec(ctx, ddl); err != nil {
		t.Fatal(err)
	}

	ack := &store.Update{RecordID: held.RecordID, From: model.Reading, ExpectLeaseID: "L1", To: model.Readed, NowMS: 2100}
	rec, c, err := s.UpdateThenClaim(ctx, ack, claim("L2"))
	if err != nil || rec.State != model.Readed {
		t.Fatalf("UpdateThenClaim = %+v, %v; want the ack to stand", rec, err)
	}
	if c.Err == nil || errors.Is(c.Err, model.ErrNotFound) || c.Record.RecordID != "" {
		t.Fatalf("the refused claim: %+v, %v; want its error", c.Record, c.Err)
	}
	for i, want := range []model.State{model.Readed, model.Unread} {
		got, err := s.GetRecord(ctx, recs[i].RecordID)
		if err != nil || got.State != want {
			t.Fatalf("record %d after the refused claim: %s, %v; want %s", i+1, got.State, err, want)
		}
	}
	evs, err := s.ListEvents(ctx, store.EventFilter{Owner: owner, Limit: 100})
	if err != nil {
		t.Fatal(err)
	}
	var states int
	for _, e := range evs {
		if e.RecordID == held.RecordID && e.Type == model.EventRecordState {
			states++
		}
	}
	if states != 1 {
		t.Fatalf("%d %s events for the acked record, want 1: %+v", states, model.EventRecordState, evs)
	}
}

// heldInbox stores a message per name in owner's INBOX and claims the
// first under lease L1. claim makes the params of a claim in that inbox.
func heldInbox(t *testing.T, s *postgres.Store, owner string, names ...string) (recs []model.Record, held model.Record, claim func(lease string) store.ClaimParams) {
	t.Helper()
	for i, name := range names {
		res, err := s.Apply(t.Context(), plan(name, owner, model.Inbox, int64(1000+i)))
		if err != nil {
			t.Fatal(err)
		}
		recs = append(recs, res.Created...)
	}
	claim = func(lease string) store.ClaimParams {
		return store.ClaimParams{Owner: owner, Box: model.Inbox, From: model.Unread, To: model.Reading,
			NowMS: 2000, LeaseID: lease, Holder: owner, LeaseUntilMS: 60_000}
	}
	held, err := s.Claim(t.Context(), claim("L1"))
	if err != nil || held.RecordID != recs[0].RecordID {
		t.Fatalf("first claim: %+v, %v", held, err)
	}
	return recs, held, claim
}
