package sqlite

import (
	"context"
	"fmt"
	"reflect"
	"testing"

	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/store"
)

// TestPlansWithInvalidUTF8AreCommittedNotLogged: JSON would change such
// a string, so the send is committed before it is answered, and survives
// a crash as it was.
func TestPlansWithInvalidUTF8AreCommittedNotLogged(t *testing.T) {
	ctx := context.Background()
	path := tempDB(t)
	s := openPath(t, path, Options{})
	p := sendPlan(1, "did:a", []string{"did:b"}, 1)
	p.Records[1].ThreadKey = "dm:\xff"
	if applyEntry(p, nil) != nil {
		t.Fatal("a plan with invalid UTF-8 would be logged")
	}
	if _, err := s.Apply(ctx, p); err != nil {
		t.Fatal(err)
	}
	if s.uncommitted.Load() {
		t.Fatal("the send waits for a commit although the log cannot carry it")
	}
	s.crash()
	s2 := openPath(t, path, Options{})
	r, err := s2.GetRecord(ctx, p.Records[1].RecordID)
	if err != nil || r.ThreadKey != "dm:\xff" {
		t.Fatalf("record after the crash: %q, %v", r.ThreadKey, err)
	}
}

// TestLogEntriesRefuseInvalidUTF8Everywhere fails when a string is added
// to a logged write's parameters (or a record) that its entry's check does
// not look at: the log would then carry it inexactly.
func TestLogEntriesRefuseInvalidUTF8Everywhere(t *testing.T) {
	cases := []struct {
		name  string
		base  func() any // every pointer, slice and map filled
		entry func(any) *logEntry
	}{
		{"apply", func() any {
			p := sendPlan(1, "did:a", []string{"did:b"}, 1)
			p.Idem = &store.Idempotency{Scope: "s", Key: "k"}
			r := &p.Records[0]
			r.Tags = []string{"t"}
			r.Route = &model.Route{ExtIDs: map[string]string{"k": "v"}}
			r.Lease = &model.Lease{}
			return p
		}, func(v any) *logEntry { return applyEntry(v.(*store.Plan), nil) }},
		{"claim", func() any {
			return &store.ClaimParams{Owner: "o", Box: model.Inbox, From: model.Unread, To: model.Reading, LeaseID: "l", Holder: "h"}
		}, func(v any) *logEntry { return claimEntry(v.(*store.ClaimParams), nil) }},
		{"update", func() any {
			return &store.Update{RecordID: "r", From: model.Reading, To: model.Readed, Lease: &model.Lease{ID: "l"},
				EndsLease: &model.EndedLease{ID: "e", By: model.EndedByAck}, Notice: &store.Notice{Owner: "o"},
				Receipt: &model.Receipt{MsgID: "m"}}
		}, func(v any) *logEntry { return updateEntry(v.(*store.Update), nil) }},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if c.entry(c.base()) == nil {
				t.Fatal("valid parameters are not logged")
			}
			n := len(stringSetters(c.base()))
			if n < 5 {
				t.Fatalf("found only %d strings: the walk is broken", n)
			}
			for i := range n {
				v := c.base()
				set := stringSetters(v)[i]
				set.set()
				if c.entry(v) != nil {
					t.Errorf("invalid UTF-8 in %s is logged", set.path)
				}
			}
		})
	}
}

type setter struct {
	path string
	set  func()
}

// stringSetters finds every string reachable from v (a pointer) that JSON
// carries, each with a function that makes it invalid UTF-8 in place.
func stringSetters(v any) []setter {
	var out []setter
	var walk func(v reflect.Value, path string)
	walk = func(v reflect.Value, path string) {
		switch v.Kind() {
		case reflect.Pointer:
			if !v.IsNil() {
				walk(v.Elem(), path)
			}
		case reflect.Struct:
			for i := range v.NumField() {
				if f := v.Type().Field(i); f.Tag.Get("json") != "-" { // not logged at all
					walk(v.Field(i), path+"."+f.Name)
				}
			}
		case reflect.Slice:
			if v.Type().Elem().Kind() == reflect.Uint8 {
				return // the body: base64 in JSON, exact
			}
			for i := range v.Len() {
				walk(v.Index(i), fmt.Sprintf("%s[%d]", path, i))
			}
		case reflect.Map:
			out = append(out, setter{path + "{key}", func() { v.SetMapIndex(reflect.ValueOf("\xff"), reflect.ValueOf("v")) }},
				setter{path + "{value}", func() { v.SetMapIndex(reflect.ValueOf("k"), reflect.ValueOf("\xff")) }})
		case reflect.String:
			out = append(out, setter{path, func() { v.SetString("\xff") }})
		}
	}
	walk(reflect.ValueOf(v), "")
	return out
}
