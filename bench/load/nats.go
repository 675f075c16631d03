package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// natsTarget runs the workload against NATS JetStream in the shape the
// issue measured: a file-storage stream with work-queue retention (a
// message is removed once acknowledged), one durable pull consumer with
// explicit acks, publishes that wait for the PubAck, and acks that wait for
// the server's confirmation (DoubleAck).
//
// All producers and consumers share one connection, as the goroutines of
// one Go process normally share a nats.Conn (the protocol multiplexes; the
// msgcenter target likewise shares one http.Client). MSGLOAD_NATS_CONNS=worker
// gives each producer and consumer a connection of its own instead, as
// separate processes would have; on this workload that was slower (see
// README.md).
type natsTarget struct {
	conns  []*nats.Conn
	js     []jetstream.JetStream
	cons   []jetstream.Consumer
	stream string
	subj   string
	prod   int // producer p uses index p % len(conns); consumer c uses (prod+c) % len(conns)
}

func (t *natsTarget) Name() string { return "nats" }

func (t *natsTarget) Open(ctx context.Context, cfg Config) error {
	if cfg.NATSURL == "" {
		return fmt.Errorf("%w: no -nats", errSkip)
	}
	t.stream = "msgload_" + cfg.Run
	t.subj = "msgload." + cfg.Run + ".q"
	t.prod = cfg.Producers
	n := cfg.Producers + cfg.Consumers
	switch v := os.Getenv("MSGLOAD_NATS_CONNS"); v {
	case "", "shared":
		n = 1
	case "worker":
	default:
		return fmt.Errorf("nats: MSGLOAD_NATS_CONNS=%q: want shared or worker", v)
	}
	for i := range n {
		nc, err := nats.Connect(cfg.NATSURL, nats.Name(fmt.Sprintf("msgload-%s-%d", cfg.Run, i)),
			nats.Timeout(2*time.Second), nats.MaxReconnects(0))
		if err != nil {
			t.closeConns()
			return fmt.Errorf("%w: nats %s: %v", errSkip, cfg.NATSURL, err)
		}
		js, err := jetstream.New(nc)
		if err != nil {
			nc.Close()
			t.closeConns()
			return err
		}
		t.conns = append(t.conns, nc)
		t.js = append(t.js, js)
	}
	stream, err := t.js[0].CreateStream(ctx, jetstream.StreamConfig{
		Name:      t.stream,
		Subjects:  []string{"msgload." + cfg.Run + ".>"},
		Storage:   jetstream.FileStorage,
		Retention: jetstream.WorkQueuePolicy,
	})
	if err != nil {
		t.closeConns()
		if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
			return fmt.Errorf("%w: nats %s: %v", errSkip, cfg.NATSURL, err)
		}
		return fmt.Errorf("nats: create stream: %w", err)
	}
	if _, err := stream.CreateConsumer(ctx, jetstream.ConsumerConfig{
		Durable:   "msgload",
		AckPolicy: jetstream.AckExplicitPolicy,
	}); err != nil {
		t.Close()
		return fmt.Errorf("nats: create consumer: %w", err)
	}
	// A consumer handle per connection, so that each connection pulls on
	// its own.
	for _, js := range t.js {
		c, err := js.Consumer(ctx, t.stream, "msgload")
		if err != nil {
			t.Close()
			return fmt.Errorf("nats: bind consumer: %w", err)
		}
		t.cons = append(t.cons, c)
	}
	return nil
}

func (t *natsTarget) Send(ctx context.Context, producer int, body []byte) error {
	_, err := t.js[producer%len(t.js)].Publish(ctx, t.subj, body)
	return err
}

func (t *natsTarget) ClaimAck(ctx context.Context, consumer int, wait time.Duration, received func([]byte)) (bool, error) {
	batch, err := t.cons[(t.prod+consumer)%len(t.cons)].Fetch(1, jetstream.FetchMaxWait(wait))
	if err != nil {
		return false, err
	}
	var msg jetstream.Msg
	for m := range batch.Messages() {
		msg = m
	}
	if msg == nil {
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, jetstream.ErrNoMessages) {
			return false, err
		}
		return false, nil
	}
	received(msg.Data())
	if err := msg.DoubleAck(ctx); err != nil {
		return false, err
	}
	return true, nil
}

func (t *natsTarget) Close() error {
	var err error
	if len(t.js) > 0 {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		err = t.js[0].DeleteStream(ctx, t.stream)
		cancel()
		if errors.Is(err, jetstream.ErrStreamNotFound) {
			err = nil
		}
	}
	t.closeConns()
	return err
}

func (t *natsTarget) closeConns() {
	for _, nc := range t.conns {
		nc.Close()
	}
	t.conns, t.js, t.cons = nil, nil, nil
}
