package core

import (
	"encoding/json"
	"slices"
	"strings"

	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
)

// matchFilter reports whether a source record (with its message) is one a
// consumer with filter f takes: every field set must match; within a list,
// any value.
func matchFilter(f *model.ConsumerFilter, rec *model.Record, m *message.Message) bool {
	// from matches the author too: a group relays its members' messages
	// as from=group, source=author.
	if len(f.From) > 0 && !slices.Contains(f.From, m.From) && (m.Source == "" || !slices.Contains(f.From, m.Source)) {
		return false
	}
	if len(f.To) > 0 && !anyIn(f.To, m.To) {
		return false
	}
	if len(f.Kind) > 0 && !slices.Contains(f.Kind, m.Kind) {
		return false
	}
	if len(f.Topic) > 0 && (m.Thread == nil || !slices.Contains(f.Topic, m.Thread.Topic)) {
		return false
	}
	if len(f.Tags) > 0 && !anyIn(f.Tags, rec.Tags) && !anyIn(f.Tags, metaTags(m)) {
		return false
	}
	if len(f.Mentions) > 0 && !anyIn(f.Mentions, m.Mentions) {
		return false
	}
	if len(f.Workspace) > 0 && !slices.Contains(f.Workspace, m.Workspace) {
		return false
	}
	if f.Text != "" && !containsFold(m.Content.Title, f.Text) && !containsFold(m.Content.Content, f.Text) {
		return false
	}
	return true
}

// metaTags reads the message's own tags, meta.tags, when it is a list of
// strings. Records carry the tags the center adds (such as "group:<did>");
// senders tag messages in meta.
func metaTags(m *message.Message) []string {
	if len(m.Meta) == 0 {
		return nil
	}
	var meta struct {
		Tags []string `json:"tags"`
	}
	if json.Unmarshal(m.Meta, &meta) != nil {
		return nil
	}
	return meta.Tags
}

func anyIn(want, have []string) bool {
	for _, h := range have {
		if slices.Contains(want, h) {
			return true
		}
	}
	return false
}

// containsFold is a case-insensitive substring test (Unicode simple case
// folding, as strings.EqualFold).
func containsFold(s, sub string) bool {
	if sub == "" {
		return true
	}
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}
