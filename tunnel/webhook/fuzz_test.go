package webhook

import (
	"errors"
	"testing"

	"github.com/msgcenter/msgcenter/model"
)

// FuzzDecode: whatever a sender posts, Decode either refuses it with an
// error or returns a post with an id, a sender and something to say.
func FuzzDecode(f *testing.F) {
	for _, s := range []string{
		`{"id":"m-1","from":"alice","text":"hi"}`,
		`{"id":"m-1","from":"did:x","to":["did:y"],"chat_id":"c","reply_url":"https://e/x","machine":{"a":1},"sent_at_ms":5}`,
		`{"id":"m-1","from":"alice","text":"hi","extra":1}`,
		`{"id":1}`, `[]`, `null`, ``, `{"id":"a","from":"b","text":"c"} {}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		in, err := Decode(body)
		if err != nil {
			var fe *model.Error
			if errors.As(err, &fe) && !errors.Is(err, model.ErrInvalid) {
				t.Fatalf("a refusal that is not ErrInvalid: %v", err)
			}
			return
		}
		if in.ID == "" || in.From == "" || (in.Text == "" && len(in.Machine) == 0) || len(in.ID) > maxIDBytes || in.SentAtMS < 0 {
			t.Fatalf("accepted %+v", in)
		}
		if in.ReplyURL != "" && checkURL(in.ReplyURL) != nil {
			t.Fatalf("accepted reply_url %q", in.ReplyURL)
		}
	})
}
