package worker_test

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/verdict-dev/verdict/internal/queue"
	"github.com/verdict-dev/verdict/internal/sink"
	"github.com/verdict-dev/verdict/worker"
)

// countingSink counts published records on their way to a real sink.
type countingSink struct {
	sink.Sink
	n atomic.Int64
}

func (c *countingSink) Publish(ctx context.Context, recs []sink.Record) error {
	if err := c.Sink.Publish(ctx, recs); err != nil {
		return err
	}
	c.n.Add(int64(len(recs)))
	return nil
}

// benchWorker measures decisions/s through a queue and a sink with a
// scorer that costs nothing: the overhead of the worker, queue and sink.
// Each message holds 4 decisions sharing one state.
func benchWorker(b *testing.B, kind string, concurrency int) {
	const perMsg = 4
	bd := setup(b, kind, bundleOpts{})
	nMsgs := (b.N + perMsg - 1) / perMsg
	var msgs []queue.Outgoing
	for i := 0; i < nMsgs; i++ {
		state := fmt.Sprintf("state %d", i)
		msgs = append(msgs, envelope(fmt.Sprintf("req-%d", i),
			mkDecision("a", state, "q1?"), mkDecision("b", state, "q2?"), mkDecision("c", state, "q3?"), mkDecision("d", state, "q4?")))
	}
	bd.send(b, msgs...)
	cs := &countingSink{Sink: bd.sink}
	w, err := worker.New(worker.Config{Queue: bd.q, Scorer: zeroScorer{}, Sinks: []sink.Sink{cs}, Concurrency: concurrency,
		Wait: time.Second, Logger: quietLogger()})
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	done := make(chan error, 1)
	go func() { done <- w.Run(context.Background()) }()
	want := int64(nMsgs * perMsg)
	for cs.n.Load() < want {
		time.Sleep(2 * time.Millisecond)
	}
	elapsed := time.Since(start)
	b.StopTimer()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_ = w.Stop(ctx)
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(want)/elapsed.Seconds(), "decisions/s")
	b.ReportMetric(float64(nMsgs)/elapsed.Seconds(), "messages/s")
}

func BenchmarkWorkerLocal(b *testing.B) {
	for _, c := range []int{1, 4} {
		b.Run(fmt.Sprintf("concurrency=%d", c), func(b *testing.B) { benchWorker(b, "local", c) })
	}
}

func BenchmarkWorkerMoto(b *testing.B) {
	for _, c := range []int{1, 4} {
		b.Run(fmt.Sprintf("concurrency=%d", c), func(b *testing.B) { benchWorker(b, "sqs", c) })
	}
}
