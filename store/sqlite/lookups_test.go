package sqlite

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"

	"github.com/msgcenter/msgcenter/model"
)

// Every write that changes a cached answer is seen by the next read, also
// while other goroutines keep filling the caches.
func TestLookupsFollowWrites(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()

	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 { // readers racing the writes below
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				_, _ = s.GroupDelivery(ctx, "did:g")
				_, _ = s.BlockedBy(ctx, "did:s", []string{"did:o", "did:p"})
				_, _ = s.Routes(ctx, "did:r")
				_, _ = s.Token(ctx, "h")
			}
		}()
	}
	defer func() { close(stop); wg.Wait() }()

	for i := range 50 {
		on := i%2 == 0
		if err := s.SetBlock(ctx, "did:o", "did:s", on, int64(i)); err != nil {
			t.Fatal(err)
		}
		got, err := s.BlockedBy(ctx, "did:s", []string{"did:o", "did:p"})
		if err != nil {
			t.Fatal(err)
		}
		if got["did:o"] != on || got["did:p"] {
			t.Fatalf("write %d: blocked = %v, want did:o=%v only", i, got, on)
		}

		routes := []model.ContactRoute{{TunnelDID: "did:tunnel:t", Address: fmt.Sprint("a", i)}}
		if err := s.SetRoutes(ctx, "did:r", routes, 1); err != nil {
			t.Fatal(err)
		}
		rs, err := s.Routes(ctx, "did:r")
		if err != nil {
			t.Fatal(err)
		}
		if len(rs) != 1 || rs[0].Address != routes[0].Address {
			t.Fatalf("write %d: routes = %+v, want address %s", i, rs, routes[0].Address)
		}
		rs[0].Address = "changed by the caller"
		if again, _ := s.Routes(ctx, "did:r"); again[0].Address != routes[0].Address {
			t.Fatal("a caller's change to Routes' result reached the cache")
		}

		role := model.RoleAgent
		if on {
			role = model.RoleTunnel
		}
		if err := s.PutToken(ctx, "h", model.Identity{DID: "did:x", Role: role}, int64(i)); err != nil {
			t.Fatal(err)
		}
		if id, err := s.Token(ctx, "h"); err != nil || id.Role != role {
			t.Fatalf("write %d: token = %+v, %v; want role %s", i, id, err, role)
		}
	}

	if d, err := s.GroupDelivery(ctx, "did:g"); err != nil || d != "" {
		t.Fatalf("before the group exists: GroupDelivery = %q, %v", d, err)
	}
	if err := s.SetGroupSubscribers(ctx, "did:g", nil, "", 1); err != nil {
		t.Fatal(err)
	}
	if d, err := s.GroupDelivery(ctx, "did:g"); err != nil || d != model.DeliverToMembers {
		t.Fatalf("after SetGroupSubscribers: GroupDelivery = %q, %v; want members", d, err)
	}
}

// TestContactReadsLeaveSendsUncommitted: a dispatch to a group reads the
// group's subscribers, who blocks its author and the like before its send.
// No logged write changes those tables, so the reads must not make the
// writer commit the sends it holds: each fan-out would commit the one
// before it, and no two would share a commit. A read of records must.
func TestContactReadsLeaveSendsUncommitted(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	s := openPath(t, tempDB(t), Options{})
	if err := s.SetGroupSubscribers(ctx, "did:g", []string{"did:m1", "did:m2"}, model.DeliverToMembers, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.SetBlock(ctx, "did:m2", "did:author", true, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.SetRoutes(ctx, "did:r", []model.ContactRoute{{TunnelDID: "did:tunnel:t", Address: "a"}}, 1); err != nil {
		t.Fatal(err)
	}
	if err := s.PutToken(ctx, "h", model.Identity{DID: "did:r", Role: model.RoleAgent}, 1); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Apply(ctx, sendPlan(1, "did:a", []string{"did:b"}, 2)); err != nil {
		t.Fatal(err)
	}
	reads := []struct {
		name string
		read func() (any, error)
		want string
	}{
		{"GroupSubscribers", func() (any, error) { return s.GroupSubscribers(ctx, "did:g") }, "[did:m1 did:m2]"},
		{"GroupDelivery", func() (any, error) { return s.GroupDelivery(ctx, "did:g") }, "members"},
		{"IsSubscriber", func() (any, error) { return s.IsSubscriber(ctx, "did:g", "did:m1") }, "true"},
		{"BlockedBy", func() (any, error) { return s.BlockedBy(ctx, "did:author", []string{"did:m1", "did:m2"}) }, "map[did:m2:true]"},
		{"Routes", func() (any, error) {
			rs, err := s.Routes(ctx, "did:r")
			var got []string
			for _, r := range rs {
				got = append(got, r.TunnelDID+" "+r.Address)
			}
			return got, err
		}, "[did:tunnel:t a]"},
		{"Token", func() (any, error) { return s.Token(ctx, "h") }, "{did:r agent}"},
	}
	for _, r := range reads {
		got, err := r.read()
		if err != nil || fmt.Sprint(got) != r.want {
			t.Fatalf("%s: %v, %v; want %s", r.name, got, err, r.want)
		}
		if !s.uncommitted.Load() {
			t.Fatalf("%s committed the writer's open transaction", r.name)
		}
	}
	// A change to the contact tables is not logged: it commits, with the
	// sends before it, before it is answered, so the next read sees it.
	if err := s.SetBlock(ctx, "did:m1", "did:author", true, 3); err != nil {
		t.Fatal(err)
	}
	if got, err := s.BlockedBy(ctx, "did:author", []string{"did:m1", "did:m2"}); err != nil || len(got) != 2 || !got["did:m1"] {
		t.Fatalf("BlockedBy after a new block: %v, %v; want did:m1 and did:m2", got, err)
	}
	if _, err := s.Apply(ctx, sendPlan(2, "did:a", []string{"did:b"}, 4)); err != nil {
		t.Fatal(err)
	}
	if !s.uncommitted.Load() {
		t.Fatal("the second send was committed before any read: this test could not see a read commit it")
	}
	if _, err := s.BoxLastSeq(ctx, "did:b", model.Inbox); err != nil {
		t.Fatal(err)
	}
	if s.uncommitted.Load() {
		t.Fatal("a read of the box counters left the send uncommitted: this test could not see a commit")
	}
}
