package core

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"

	"github.com/msgcenter/msgcenter/store"
	"github.com/msgcenter/msgcenter/store/postgres"
	"github.com/msgcenter/msgcenter/store/sqlite"
	"github.com/msgcenter/msgcenter/wire"
)

var (
	admin  = model.Identity{DID: AdminDID, Role: model.RoleAdmin}
	tunnel = model.Identity{DID: "did:tunnel:tg", Role: model.RoleTunnel}
)

// clock is a settable clock for tests that must control time.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func newClock() *clock { return &clock{t: time.UnixMilli(1_700_000_000_000)} }

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// newService returns a service on a fresh store: SQLite, or PostgreSQL
// (a schema of its own) when MSGCENTER_CORE_STORE=postgres, so the same
// tests and benchmarks run on both drivers. With clk nil the real clock is
// used.
func newService(t testing.TB, clk *clock) *Service {
	t.Helper()
	cfg := Config{}
	if clk != nil {
		cfg.Now = clk.Now
	}
	return New(openTestStore(t), cfg)
}

func openTestStore(t testing.TB) store.Store {
	t.Helper()
	ctx := context.Background()
	if os.Getenv("MSGCENTER_CORE_STORE") != "postgres" {
		st, err := sqlite.Open(ctx, filepath.Join(t.TempDir(), "db.sqlite"), sqlite.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { st.Close() })
		return st
	}
	url := os.Getenv("MSGCENTER_TEST_POSTGRES_URL")
	if url == "" {
		t.Fatal("MSGCENTER_CORE_STORE=postgres needs MSGCENTER_TEST_POSTGRES_URL")
	}
	var rnd [6]byte
	_, _ = rand.Read(rnd[:])
	schema := "mc_core_" + hex.EncodeToString(rnd[:])
	st, err := postgres.Open(ctx, url, postgres.Options{Schema: schema})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		st.Close()
		conn, err := pgx.Connect(ctx, url)
		if err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
			return
		}
		defer conn.Close(ctx)
		if _, err := conn.Exec(ctx, "DROP SCHEMA "+pgx.Identifier{schema}.Sanitize()+" CASCADE"); err != nil {
			t.Errorf("drop schema %s: %v", schema, err)
		}
	})
	return st
}

func agent(did string) model.Identity { return model.Identity{DID: did, Role: model.RoleAgent} }

func chat(from string, to []string, text string) *message.Message {
	return &message.Message{From: from, To: to, Kind: message.KindChat, Content: message.Content{Content: text}}
}

// tb is what helpers need from *testing.T and *rapid.T alike.
type tb interface {
	Helper()
	Fatalf(format string, args ...any)
}

func mustDispatch(t tb, s *Service, m *message.Message) *wire.DispatchResult {
	t.Helper()
	res, err := s.Dispatch(context.Background(), admin, &wire.DispatchRequest{Msg: m})
	if err != nil {
		t.Fatalf("dispatch: %v", err)
	}
	return res
}

func ptr[T any](v T) *T { return &v }

// syncAll reads a whole box by seq.
func syncAll(t tb, s *Service, owner string, box model.BoxKind) []wire.RecordWithMsg {
	t.Helper()
	var out []wire.RecordWithMsg
	after := int64(0)
	for {
		res, err := s.Sync(context.Background(), admin, wire.SyncQuery{Owner: owner, Box: box, AfterSeq: after, Limit: 1000, WithObject: true})
		if err != nil {
			t.Fatalf("sync: %v", err)
		}
		out = append(out, res.Items...)
		if len(res.Items) == 0 {
			return out
		}
		after = res.LastSeq
	}
}

func texts(items []wire.RecordWithMsg) []string {
	var out []string
	for _, it := range items {
		m, err := message.Decode(it.Msg)
		if err != nil {
			panic(fmt.Sprint("decode: ", err))
		}
		out = append(out, m.Content.Content)
	}
	return out
}
