package sqlite

import (
	"context"
	"database/sql"
	"fmt"
	"reflect"
	"testing"

	"pgregory.net/rapid"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// TestApplyLogMatchesAStoreThatNeverCrashed runs random sequences of
// sends, claims, acks, blocks and reads, with crashes between them, and
// the same operations without the crashes on a second store: every answer
// and, at the end, everything readable must be the same.
func TestApplyLogMatchesAStoreThatNeverCrashed(t *testing.T) {
	ctx := context.Background()
	path := tempDB(t)
	// The real linger: the timer's commits interleave with the actions.
	s := openPath(t, path, Options{linger: commitEvery})
	ref := openPath(t, tempDB(t), Options{linger: commitEvery})
	iter := 0
	rapid.Check(t, func(rt *rapid.T) {
		// Both stores live across iterations (opening one costs tens of
		// milliseconds); each iteration has DIDs and messages of its own.
		iter++
		var owners []string
		for _, o := range []string{"a", "b", "c", "d"} {
			owners = append(owners, fmt.Sprintf("did:%d:%s", iter, o))
		}
		now := int64(1000)
		var known []string // record ids answered created, for point reads
		steps := rapid.IntRange(1, 60).Draw(rt, "steps")
		for i := range steps {
			now++
			switch op := rapid.IntRange(0, 10).Draw(rt, "op"); {
			case op <= 4: // a send, sometimes repeating an earlier message
				n := iter*100 + rapid.IntRange(0, 20).Draw(rt, "msg")
				from := rapid.SampledFrom(owners).Draw(rt, "from")
				to := rapid.SliceOfNDistinct(rapid.SampledFrom(owners), 1, 3, rapid.ID[string]).Draw(rt, "to")
				p := sendPlan(n, from, to, now)
				for j := range p.Records {
					// What the overlay must hand back as the database does.
					switch rapid.IntRange(0, 3).Draw(rt, "extras") {
					case 1:
						p.Records[j].Tags = []string{"group:g", "t"}
					case 2:
						p.Records[j].Tags = []string{}
						p.Records[j].Route = &model.Route{TunnelDID: "did:tunnel", ExtIDs: map[string]string{}}
					case 3:
						p.Records[j].Route = &model.Route{TunnelDID: "did:tunnel", Address: "a", ExtIDs: map[string]string{"k": "v"}}
					}
				}
				if rapid.Bool().Draw(rt, "idem") {
					p.Idem = &store.Idempotency{Scope: from, Key: fmt.Sprint(rapid.IntRange(0, 3).Draw(rt, "key"))}
				}
				a, aerr := s.Apply(ctx, p)
				b, berr := ref.Apply(ctx, p)
				if !sameErr(aerr, berr) || !reflect.DeepEqual(a, b) {
					rt.Fatalf("step %d Apply: %+v, %v; never crashed: %+v, %v", i, a, aerr, b, berr)
				}
				if aerr == nil {
					for _, c := range a.Created {
						known = append(known, c.RecordID)
					}
				}
			case op == 5: // claim and maybe ack
				o := rapid.SampledFrom(owners).Draw(rt, "claimer")
				cp := store.ClaimParams{Owner: o, Box: model.Inbox, From: model.Unread, To: model.Reading, NowMS: now,
					LeaseID: fmt.Sprint("l", i), Holder: o, LeaseUntilMS: now + 1000}
				a, aerr := s.Claim(ctx, cp)
				b, berr := ref.Claim(ctx, cp)
				if !sameErr(aerr, berr) || !reflect.DeepEqual(a, b) {
					rt.Fatalf("step %d Claim: %+v, %v; never crashed: %+v, %v", i, a, aerr, b, berr)
				}
				if then := rapid.IntRange(0, 3).Draw(rt, "then"); aerr == nil && then > 0 {
					// An ack, or a nack that puts the record back with a backoff.
					u := &store.Update{RecordID: a.RecordID, From: model.Reading, ExpectLeaseID: cp.LeaseID, To: model.Readed, NowMS: now}
					if then == 2 {
						u.To, u.VisibleAtMS = model.Unread, now+rapid.Int64Range(0, 5).Draw(rt, "backoff")
					}
					if then == 3 {
						// An ack that claims the next record in the same write:
						// the same as the two calls on the store that never
						// crashed.
						next := cp
						next.LeaseID = fmt.Sprint("n", i)
						switch rapid.IntRange(0, 2).Draw(rt, "pair") {
						case 1: // an ack that fails: nothing is claimed
							u.ExpectLeaseID = "not-" + cp.LeaseID
						case 2: // a release the claim takes back
							u.To, u.VisibleAtMS = model.Unread, now
						}
						a, ac, aerr := s.UpdateThenClaim(ctx, u, next)
						b, berr := ref.Update(ctx, u)
						var bc store.Claimed
						if berr == nil {
							bc.Record, bc.Err = ref.Claim(ctx, next)
						}
						if !sameErr(aerr, berr) || !reflect.DeepEqual(a, b) || !sameErr(ac.Err, bc.Err) || !reflect.DeepEqual(ac.Record, bc.Record) {
							rt.Fatalf("step %d UpdateThenClaim: %+v, %+v, %v; never crashed, one after the other: %+v, %+v, %v", i, a, ac, aerr, b, bc, berr)
						}
						break
					}
					a, aerr := s.Update(ctx, u)
					b, berr := ref.Update(ctx, u)
					if !sameErr(aerr, berr) || !reflect.DeepEqual(a, b) {
						rt.Fatalf("step %d Update: %+v, %v; never crashed: %+v, %v", i, a, aerr, b, berr)
					}
				}
			case op == 6: // a write of another kind
				o, blocked := rapid.SampledFrom(owners).Draw(rt, "blocker"), rapid.SampledFrom(owners).Draw(rt, "blocked")
				on := rapid.Bool().Draw(rt, "on")
				if err := s.SetBlock(ctx, o, blocked, on, now); err != nil {
					rt.Fatal(err)
				}
				if err := ref.SetBlock(ctx, o, blocked, on, now); err != nil {
					rt.Fatal(err)
				}
			case op == 7 && len(known) > 0 && rapid.Bool().Draw(rt, "point"): // a point read (overlay.go)
				id := rapid.SampledFrom(known).Draw(rt, "record")
				a, aerr := s.GetRecord(ctx, id)
				// The reference answers from the database, not its overlay.
				if err := ref.settle(ctx); err != nil {
					rt.Fatal(err)
				}
				b, berr := ref.GetRecord(ctx, id)
				if aerr != nil || berr != nil || !reflect.DeepEqual(a, b) {
					rt.Fatalf("step %d GetRecord(%s): %+v, %v; never crashed: %+v, %v", i, id, a, aerr, b, berr)
				}
			case op == 7: // a read
				o := rapid.SampledFrom(owners).Draw(rt, "reader")
				a, aerr := s.Sync(ctx, store.SyncParams{Owner: o, Box: model.Inbox, Limit: 1000})
				b, berr := ref.Sync(ctx, store.SyncParams{Owner: o, Box: model.Inbox, Limit: 1000})
				if aerr != nil || berr != nil || !reflect.DeepEqual(a, b) {
					for j := range min(len(a), len(b)) {
						if !reflect.DeepEqual(a[j], b[j]) {
							rt.Fatalf("step %d Sync of %s, record %d:\n%+v\nnever crashed:\n%+v", i, o, j, a[j], b[j])
						}
					}
					rt.Fatalf("step %d Sync of %s: %d records, %v; never crashed: %d, %v", i, o, len(a), aerr, len(b), berr)
				}
			case op == 8: // a waiting claimer's reads, which do not settle
				o := rapid.SampledFrom(owners).Draw(rt, "waiter")
				at := now + rapid.Int64Range(0, 6).Draw(rt, "at")
				a, aerr := s.Claimable(ctx, o, model.Inbox, model.Unread, at)
				av, aok, verr := s.NextVisible(ctx, o, model.Inbox, model.Unread, at)
				if err := ref.settle(ctx); err != nil {
					rt.Fatal(err)
				}
				// The truth, from the settled database.
				var b bool
				berr := ref.r.QueryRow(`SELECT EXISTS (SELECT 1 FROM records WHERE owner = ? AND box = 'INBOX'
					AND state = 'UNREAD' AND visible_at_ms <= ?)`, o, at).Scan(&b)
				var next sql.NullInt64
				if err := ref.r.QueryRow(`SELECT MIN(visible_at_ms) FROM records WHERE owner = ? AND box = 'INBOX'
					AND state = 'UNREAD' AND visible_at_ms > ?`, o, at).Scan(&next); err != nil {
					rt.Fatal(err)
				}
				bv, bok := next.Int64, next.Valid
				// They may be wrong only in the safe direction: a yes for
				// nothing to take, a wake-up too early.
				if aerr != nil || berr != nil || (b && !a) {
					rt.Fatalf("step %d Claimable(%s, %d) = %v, %v; never crashed and settled: %v, %v", i, o, at, a, aerr, b, berr)
				}
				if verr != nil || (bok && (!aok || av > bv)) {
					rt.Fatalf("step %d NextVisible(%s, %d) = %d %v, %v; never crashed and settled: %d %v", i, o, at, av, aok, verr, bv, bok)
				}
			default: // the process dies
				s.crash()
				var err error
				if s, err = Open(ctx, path, Options{linger: commitEvery}); err != nil {
					rt.Fatalf("reopen after a crash: %v", err)
				}
				t.Cleanup(func() { s.Close() })
			}
		}
		if a, b := snapOwners(rt, s, owners), snapOwners(rt, ref, owners); !reflect.DeepEqual(a, b) {
			rt.Fatalf("the store that crashed differs from the one that did not:\n%+v\n%+v", a, b)
		}
	})
}

// snapOwners is snap with the event log read per owner, so that stores
// shared by several test iterations compare only the iteration's part.
func snapOwners(t fataler, s *Store, owners []string) snapshot {
	t.Helper()
	out := snap(t, s, owners)
	out.Events = nil
	for _, o := range owners {
		evs, err := s.ListEvents(context.Background(), store.EventFilter{Owner: o, Limit: 100000})
		if err != nil {
			t.Fatal(err)
		}
		out.Events = append(out.Events, evs...)
	}
	return out
}

func sameErr(a, b error) bool {
	if a == nil || b == nil {
		return a == b
	}
	return a.Error() == b.Error()
}
