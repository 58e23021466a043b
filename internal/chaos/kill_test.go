//go:build chaos

package chaos

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/internal/queue"
	"github.com/verdict-dev/verdict/internal/queue/queuetest"
	"github.com/verdict-dev/verdict/internal/sink"
)

// Sizes of the kill checks.
const (
	upKills         = 6  // kill -9 of `verdict up`
	upRequests      = 70 // two decisions each: 140 decisions
	sqsKills        = 6  // kill -9 of an SQS worker
	sqsMessages     = 60 // two decisions each: 120 decisions
	dlqKills        = 20 // kills 0.1–1.5 s apart under a steady feed
	dlqMessages     = 60 // fed during the kills, two decisions each
	stateReps       = 8  // sentences per state: prefill long enough to be killed in
	killSettleLimit = 3 * time.Minute
)

// TestKillUpLosesNothing protects `verdict up`'s durability: kill -9 of the
// whole process, again and again while decisions are accepted and scored,
// loses no accepted decision and stores no second, different result.
// Clients cut off by a kill retry with the same Idempotency-Key, as the
// front door asks; the retry must not become a second request.
func TestKillUpLosesNothing(t *testing.T) {
	r := seeded(t)
	addr, data := freeAddr(t), t.TempDir()
	args := []string{"--visibility", "2s", "--concurrency", "2"}
	p, url := startUp(t, addr, data, args...)

	// The feeder submits every request, retrying through the kills until
	// one process accepted it; it records the request id it was given.
	var mu sync.Mutex
	ids := map[int]string{} // request index → request id
	feedDone := make(chan struct{})
	go func() {
		defer close(feedDone)
		c := &http.Client{Timeout: 10 * time.Second}
		for i := range upRequests {
			for attempt := 0; ; attempt++ {
				status, _, body, err := post(context.Background(), c, url+"/v1/decisions", semifBatch("up", i, stateReps),
					map[string]string{"Idempotency-Key": fmt.Sprintf("chaos-up-%d", i)})
				if err == nil && status == http.StatusAccepted {
					var acc struct {
						RequestID string `json:"request_id"`
					}
					if json.Unmarshal(body, &acc) == nil && acc.RequestID != "" {
						mu.Lock()
						if prev, ok := ids[i]; ok && prev != acc.RequestID {
							ids[i] = "differs: " + prev + " then " + acc.RequestID
						} else {
							ids[i] = acc.RequestID
						}
						mu.Unlock()
						break
					}
				}
				if attempt > 400 {
					return // the check below names the missing request
				}
				time.Sleep(50 * time.Millisecond)
			}
			time.Sleep(30 * time.Millisecond)
		}
	}()

	for k := range upKills {
		time.Sleep(between(r, 300*time.Millisecond, 2*time.Second))
		p.kill()
		t.Logf("kill %d of `verdict up`; %d of %d decisions stored so far", k+1, len(readStore(t, filepath.Join(data, "results.db"))), 2*upRequests)
		p, _ = startUp(t, addr, data, args...)
	}
	<-feedDone
	mu.Lock()
	require.Len(t, ids, upRequests, "every request was accepted by some process")
	mu.Unlock()

	want := map[string]bool{}
	for i := range upRequests {
		require.NotContains(t, ids[i], "differs", "request %d: a retry with the same Idempotency-Key got another request id", i)
		want[ids[i]+"/queue"], want[ids[i]+"/urgent"] = true, true
	}
	store := filepath.Join(data, "results.db")
	eventually(t, killSettleLimit, 200*time.Millisecond, func() bool {
		got := readStore(t, store)
		for key := range want {
			if _, ok := got[key]; !ok {
				return false
			}
		}
		return true
	}, "every accepted decision has a stored result after the kills")
	_, err := p.terminate(t, time.Minute)
	require.NoError(t, err)

	got := readStore(t, filepath.Join(data, "results.db"))
	require.Len(t, got, len(want), "one stored result per accepted decision, none more")
	for key := range want {
		rec, ok := got[key]
		require.True(t, ok, "decision %s lost", key)
		requireDecided(t, rec)
	}
	require.Zero(t, localDeadLetters(t, filepath.Join(data, "queue.db"), "cpu"), "no message dead-lettered")
}

// sqsWorker starts `verdict worker --queue sqs` on moto; it returns once
// the worker logged that it started.
func sqsWorker(t *testing.T, moto *queuetest.Moto, work, results string, extra ...string) *proc {
	t.Helper()
	env := append([]string{"VERDICT_SQS_ENDPOINT=" + moto.Endpoint}, awsEnv...)
	p := start(t, env, append([]string{"worker", "--queue", "sqs", "--queue-url", work, "--region", "us-east-1",
		"--results-queue-url", results, "--results-store", "none", "--model", tinyModel, "--threads", "2",
		"--wait", "1s", "--visibility", "3s", "--log-format", "json"}, extra...)...)
	return p
}

// sqsResults drains a results queue into copies by key, failing on a
// second copy that differs from the first.
func sqsResults(t *testing.T, ctx context.Context, q queue.Queue, got map[string]sink.Record, copies map[string]int) {
	t.Helper()
	msgs, err := queuetest.Drain(ctx, q, time.Second)
	require.NoError(t, err)
	for _, m := range msgs {
		var rec sink.Record
		require.NoError(t, json.Unmarshal(m.Body, &rec))
		copies[rec.Key()]++
		if first, ok := got[rec.Key()]; ok {
			require.True(t, sameResult(first, rec), "a second result of %s differs:\n%s\nthen\n%s", rec.Key(), mustJSON(first), m.Body)
			continue
		}
		got[rec.Key()] = rec
	}
}

func mustJSON(v any) string {
	b, _ := json.Marshal(v)
	return string(b)
}

// newSQS opens a queue of moto.
func newSQS(t *testing.T, ctx context.Context, moto *queuetest.Moto, url string) queue.Queue {
	t.Helper()
	ac := moto.AWS()
	q, err := queue.NewSQS(ctx, queue.SQSConfig{URL: url, Endpoint: moto.Endpoint, AWS: &ac})
	require.NoError(t, err)
	return q
}

// sendAll sends messages in batches of ten.
func sendAll(t *testing.T, ctx context.Context, q queue.Sender, msgs []queue.Outgoing) {
	t.Helper()
	for len(msgs) > 0 {
		n := min(len(msgs), queue.MaxBatch)
		errs, err := q.Send(ctx, msgs[:n])
		require.NoError(t, err)
		require.NoError(t, errors.Join(errs...))
		msgs = msgs[n:]
	}
}

// TestKillSQSWorkerLosesNothing protects the SQS worker's at-least-once
// delivery: kill -9 of the worker, again and again while it scores, loses
// no decision (every one reaches the results queue) and a redelivered
// message publishes the same result again, never a different one.
func TestKillSQSWorkerLosesNothing(t *testing.T) {
	r := seeded(t)
	ctx := context.Background()
	moto, err := queuetest.StartMoto()
	require.NoError(t, err)
	defer moto.Stop()
	work, err := moto.CreateQueue(ctx, "chaos-work", queuetest.QueueOptions{})
	require.NoError(t, err)
	results, err := moto.CreateQueue(ctx, "chaos-results", queuetest.QueueOptions{})
	require.NoError(t, err)

	want := map[string]bool{}
	var msgs []queue.Outgoing
	for i := range sqsMessages {
		m, keys := envelope(t, "sqs", i, 3*stateReps)
		msgs = append(msgs, m)
		want[keys[0]], want[keys[1]] = true, true
	}
	in := newSQS(t, ctx, moto, work.URL)

	// The messages come in waves, one before each start, so that every
	// kill finds work in flight.
	got, copies := map[string]sink.Record{}, map[string]int{}
	rq := newSQS(t, ctx, moto, results.URL)
	wave := (len(msgs) + sqsKills - 1) / sqsKills
	for k := range sqsKills {
		sendAll(t, ctx, in, msgs[min(k*wave, len(msgs)):min((k+1)*wave, len(msgs))])
		p := sqsWorker(t, moto, work.URL, results.URL)
		p.waitLog(t, msgWorkerStarted, startTimeout)
		time.Sleep(between(r, 300*time.Millisecond, 3*time.Second))
		p.kill()
		sqsResults(t, ctx, rq, got, copies)
		t.Logf("kill %d of the SQS worker; %d of %d decisions sent are published", k+1, len(got), 2*min((k+1)*wave, len(msgs)))
	}
	p := sqsWorker(t, moto, work.URL, results.URL)
	eventually(t, killSettleLimit, 0, func() bool {
		sqsResults(t, ctx, rq, got, copies)
		return len(got) >= len(want)
	}, "every decision reaches the results queue")
	_, err = p.terminate(t, time.Minute)
	require.NoError(t, err)
	sqsResults(t, ctx, rq, got, copies)

	require.Len(t, got, len(want), "results only for decisions that were sent")
	extra := 0
	for key := range want {
		rec, ok := got[key]
		require.True(t, ok, "decision %s lost", key)
		requireDecided(t, rec)
		extra += copies[key] - 1
	}
	t.Logf("%d redelivered copies, all equal to the first", extra)
	visible, inFlight, err := moto.Count(ctx, work.URL)
	require.NoError(t, err)
	require.Zero(t, visible+inFlight, "the work queue is empty")
}

// TestSQSWorkerCrashesSendNoInnocentToDLQ protects innocent messages from
// the dead-letter queue: a worker killed at random moments 0.1–1.5 s apart
// under a steady feed (maxReceiveCount 5) must not take messages that did
// nothing wrong to the DLQ with it. A redelivered message is processed
// alone, so only a message that itself crashes the worker can reach its
// fifth receive. Needs the redelivery-isolation fix of issue 15.
func TestSQSWorkerCrashesSendNoInnocentToDLQ(t *testing.T) {
	r := seeded(t)
	ctx := context.Background()
	moto, err := queuetest.StartMoto()
	require.NoError(t, err)
	defer moto.Stop()
	work, err := moto.CreateQueue(ctx, "chaos-dlq-work", queuetest.QueueOptions{MaxReceives: 5})
	require.NoError(t, err)
	results, err := moto.CreateQueue(ctx, "chaos-dlq-results", queuetest.QueueOptions{})
	require.NoError(t, err)
	in := newSQS(t, ctx, moto, work.URL)

	var feed []queue.Outgoing
	var feedKeys [][]string
	for i := range dlqMessages {
		m, keys := envelope(t, "dlq", i, stateReps)
		feed, feedKeys = append(feed, m), append(feedKeys, keys)
	}
	want := map[string]bool{}
	var wmu sync.Mutex
	feedCtx, stopFeed := context.WithCancel(ctx)
	fed := make(chan struct{})
	go func() {
		defer close(fed)
		tick := time.NewTicker(200 * time.Millisecond)
		defer tick.Stop()
		for i := range feed {
			select {
			case <-feedCtx.Done():
				return
			case <-tick.C:
			}
			if errs, err := in.Send(ctx, feed[i:i+1]); err == nil && errs[0] == nil {
				wmu.Lock()
				want[feedKeys[i][0]], want[feedKeys[i][1]] = true, true
				wmu.Unlock()
			}
		}
	}()
	var killed []*proc
	for k := range dlqKills {
		p := sqsWorker(t, moto, work.URL, results.URL, "--log-level", "debug")
		p.waitLog(t, msgWorkerStarted, startTimeout)
		time.Sleep(between(r, 100*time.Millisecond, 1500*time.Millisecond))
		p.kill()
		killed = append(killed, p)
		t.Logf("kill %d of the SQS worker", k+1)
	}
	most := 0
	for _, p := range killed {
		most = max(most, p.maxNumber("message", "receive_count"))
	}
	t.Logf("the killed workers saw receive counts up to %d", most)
	stopFeed()
	<-fed
	wmu.Lock()
	defer wmu.Unlock()
	require.NotEmpty(t, want)

	p := sqsWorker(t, moto, work.URL, results.URL)
	got, copies := map[string]sink.Record{}, map[string]int{}
	rq := newSQS(t, ctx, moto, results.URL)
	dlq := newSQS(t, ctx, moto, work.DLQURL)
	var dead []string
	eventually(t, killSettleLimit, 0, func() bool {
		sqsResults(t, ctx, rq, got, copies)
		ms, err := queuetest.Drain(ctx, dlq, 100*time.Millisecond)
		require.NoError(t, err)
		for _, m := range ms {
			env, _ := queue.UnmarshalEnvelope(m.Body)
			if env != nil {
				dead = append(dead, env.RequestID)
			}
		}
		visible, inFlight, err := moto.Count(ctx, work.URL)
		require.NoError(t, err)
		return len(got)+2*len(dead) >= len(want) && visible+inFlight == 0
	}, "every message ends in a result or the DLQ")
	_, err = p.terminate(t, time.Minute)
	require.NoError(t, err)
	require.Empty(t, dead, "innocent messages reached the dead-letter queue (%d of %d messages)", len(dead), len(want)/2)
	for key := range want {
		rec, ok := got[key]
		require.True(t, ok, "decision %s lost", key)
		requireDecided(t, rec)
	}
}
