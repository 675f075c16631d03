package main

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/msgcenter/msgcenter/client"
	"github.com/msgcenter/msgcenter/message"
	"github.com/msgcenter/msgcenter/model"
	"github.com/msgcenter/msgcenter/wire"
)

// msgcenterTarget drives a live msgcenter server over its HTTP API, as an
// application would: post_send to a local recipient, get_next with a
// lease, then the READED state change that acknowledges it.
type msgcenterTarget struct {
	c     *client.Client
	run   string
	rcpt  string
	mu    sync.Mutex
	group map[string]string // "size/delivery" -> group DID, set up on first use
	// With -ack-next, the record each consumer's last ack claimed (nil:
	// none); each consumer number is one goroutine's.
	ackNext bool
	held    []*wire.RecordWithMsg
}

func (t *msgcenterTarget) Name() string { return "msgcenter" }

func (t *msgcenterTarget) Open(ctx context.Context, cfg Config) error {
	if cfg.MsgcenterURL == "" {
		return fmt.Errorf("%w: no -url", errSkip)
	}
	conns := cfg.Producers + cfg.Consumers + 4
	tr := &http.Transport{MaxIdleConns: conns, MaxIdleConnsPerHost: conns,
		DialContext: (&net.Dialer{Timeout: 5 * time.Second, KeepAlive: 30 * time.Second}).DialContext}
	t.c = client.New(cfg.MsgcenterURL, cfg.MsgcenterToken, client.WithHTTPClient(&http.Client{Transport: tr}))
	t.run = cfg.Run
	t.rcpt = "did:load:" + cfg.Run + ":rcpt"
	t.group = make(map[string]string)
	t.ackNext, t.held = cfg.AckNext, make([]*wire.RecordWithMsg, cfg.Consumers)
	if err := t.c.Health(ctx); err != nil {
		return fmt.Errorf("%w: %v", errSkip, err)
	}
	return nil
}

func (t *msgcenterTarget) Send(ctx context.Context, producer int, body []byte) error {
	m := &message.Message{From: fmt.Sprintf("did:load:%s:p%d", t.run, producer), To: []string{t.rcpt},
		Kind: message.KindChat, Content: message.Content{Content: string(body)}}
	_, err := t.c.PostSend(ctx, &wire.PostSendRequest{Msg: m})
	return err
}

func (t *msgcenterTarget) ClaimAck(ctx context.Context, consumer int, wait time.Duration, received func([]byte)) (bool, error) {
	r := t.held[consumer]
	t.held[consumer] = nil
	if r == nil {
		var err error
		if r, err = t.c.Next(ctx, t.rcpt, model.Inbox, &wire.NextRequest{WaitMS: wait.Milliseconds()}); err != nil || r == nil {
			return false, err
		}
	}
	m, err := client.DecodeMessage(r.Msg)
	if err != nil {
		return false, err
	}
	received([]byte(m.Content.Content))
	// The consumer has the message already: like JetStream's ack, the
	// answer need not carry it again.
	noBody := false
	req := &wire.StateRequest{NewState: model.Readed, LeaseID: r.Record.Lease.ID, WithObject: &noBody}
	if t.ackNext {
		// Without waiting: the ack's answer is its confirmation, and the
		// next call waits if nothing came.
		req.Next = &wire.NextRequest{}
	}
	res, err := t.c.SetState(ctx, r.Record.RecordID, req)
	if err != nil {
		return false, err
	}
	t.held[consumer] = res.Next
	return true, nil
}

// Release puts back, unacknowledged, the records the consumers' last acks
// claimed (-ack-next) that no ClaimAck handled: a phase can end first.
func (t *msgcenterTarget) Release(ctx context.Context) error {
	for i, r := range t.held {
		if r == nil {
			continue
		}
		t.held[i] = nil
		noBody := false
		if _, err := t.c.SetState(ctx, r.Record.RecordID, &wire.StateRequest{NewState: model.Unread, LeaseID: r.Record.Lease.ID, WithObject: &noBody}); err != nil {
			return fmt.Errorf("release %s: %w", r.Record.RecordID, err)
		}
	}
	return nil
}

// SendGroup dispatches one message through a group of g subscribers, as a
// group relays it (from the group, source the author), all stored before
// the 200 in one transaction: with delivery "members" every subscriber's
// INBOX record and the GROUP_INBOX record; with "group" the GROUP_INBOX
// record, which the subscribers read.
func (t *msgcenterTarget) SendGroup(ctx context.Context, g int, delivery string, body []byte) error {
	key := fmt.Sprintf("%d/%s", g, delivery)
	t.mu.Lock()
	grp, ok := t.group[key]
	t.mu.Unlock()
	if !ok {
		grp = fmt.Sprintf("did:load:%s:group%d-%s", t.run, g, delivery)
		subs := make([]string, g)
		for i := range subs {
			subs[i] = fmt.Sprintf("did:load:%s:g%d-%s:m%d", t.run, g, delivery, i)
		}
		req := &wire.SubscribersRequest{Subscribers: subs, Delivery: model.GroupDelivery(delivery)}
		if _, err := t.c.SetGroup(ctx, grp, req); err != nil {
			return err
		}
		t.mu.Lock()
		t.group[key] = grp
		t.mu.Unlock()
	}
	m := &message.Message{From: grp, Source: "did:load:" + t.run + ":author", Kind: message.KindGroupMsg,
		Content: message.Content{Content: string(body)}}
	res, err := t.c.Dispatch(ctx, &wire.DispatchRequest{Msg: m})
	if err != nil {
		return err
	}
	want := g
	if delivery == "group" {
		want = 0 // the subscribers read the group's box
	}
	if res.DeliveredGroup != grp || string(res.GroupDelivery) != delivery || len(res.DeliveredAgents) != want {
		return fmt.Errorf("group send reached %q (delivery %q) and %d subscribers, want %q (%q) and %d",
			res.DeliveredGroup, res.GroupDelivery, len(res.DeliveredAgents), grp, delivery, want)
	}
	return nil
}

func (t *msgcenterTarget) Close() error { return nil }
