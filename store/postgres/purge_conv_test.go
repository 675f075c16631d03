package postgres_test

import (
	"context"
	"testing"
	"time"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// Retention does not wait for a send that holds a conversation's row: it
// passes over that conversation (the send is pointing it at its new
// record) and clears the others that named a record it deleted.
func TestPurgeDoesNotWaitForConversations(t *testing.T) {
	t.Parallel()
	schema := newSchema(t)
	s := openStore(t, schema)
	ctx := t.Context()
	const owner = "did:test:conv"
	for i, th := range []string{"held", "free"} {
		p := plan("conv-purge-"+th, owner, model.Inbox, int64(1000+i))
		p.Records[0].ThreadKey = th
		p.Records[0].State = model.Readed
		if _, err := s.Apply(ctx, p); err != nil {
			t.Fatal(err)
		}
	}
	tx := schemaTx(t, schema)
	mustExec(t, tx, `SELECT 1 FROM conversations WHERE owner = $1 AND thread_key = 'held' FOR UPDATE`, owner)

	pctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	start := time.Now()
	res, err := s.Purge(pctx, store.PurgeParams{NowMS: 100_000, Limit: 100,
		TerminalBeforeMS: map[model.BoxKind]int64{model.Inbox: 50_000}})
	if err != nil || res.Records[model.Inbox] != 2 {
		t.Fatalf("Purge = %+v, %v; want both records gone", res, err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Fatalf("Purge waited %v for the held conversation", took)
	}
	if err := tx.Rollback(ctx); err != nil {
		t.Fatal(err)
	}
	cs, err := s.ListConversations(ctx, store.ConversationQuery{Owner: owner, Limit: 10})
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, c := range cs {
		got[c.ThreadKey] = c.LastRecordID
	}
	if got["free"] != "" || got["held"] == "" {
		t.Fatalf("last records after the purge: %q; want the free thread's cleared, the held one's passed over", got)
	}
}
