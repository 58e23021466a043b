package queuetest

import (
	"context"
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/internal/queue"
)

// Harness is one queue under test.
type Harness struct {
	// Queue is the queue.
	Queue queue.Queue
	// DeadLettersFunc counts the messages in the dead-letter queue.
	DeadLettersFunc func(ctx context.Context) (int, error)
	// PassFunc lets d pass on the queue's clock: a queue with a settable
	// clock advances it (see Clock); nil sleeps (a real SQS or moto).
	PassFunc func(d time.Duration)
}

// pass lets d pass on the queue's clock.
func (h Harness) pass(d time.Duration) {
	if h.PassFunc != nil {
		h.PassFunc(d)
		return
	}
	time.Sleep(d)
}

// Factory makes a fresh, empty queue for one test. maxReceives > 0 asks
// for a dead-letter queue after that many receives; dedup asks for a queue
// that honours DedupID (FIFO on SQS).
type Factory func(t *testing.T, maxReceives int, dedup bool) Harness

// RunSuite checks the semantics every queue.Queue must have. Each subtest
// uses its own shallow queue and runs in parallel.
func RunSuite(t *testing.T, newQueue Factory) {
	t.Run("SendReceiveDelete", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		h := newQueue(t, 0, false)
		errs, err := h.Queue.Send(ctx, []queue.Outgoing{
			{Body: []byte("m0"), Attributes: map[string]string{"request_id": "r0"}},
			{Body: []byte("m1")},
			{Body: []byte("m2")},
		})
		require.NoError(t, err)
		require.Equal(t, []error{nil, nil, nil}, errs)
		var got []queue.Message
		for len(got) < 3 {
			msgs, err := h.Queue.Receive(ctx, queue.ReceiveOptions{Max: 10, Wait: 2 * time.Second, Visibility: 30 * time.Second})
			require.NoError(t, err)
			require.NotEmpty(t, msgs, "messages were sent but none came back")
			got = append(got, msgs...)
		}
		require.Len(t, got, 3)
		sort.Slice(got, func(i, j int) bool { return string(got[i].Body) < string(got[j].Body) })
		for i, m := range got {
			require.Equal(t, fmt.Sprintf("m%d", i), string(m.Body))
			require.Equal(t, 1, m.ReceiveCount)
			require.NotEmpty(t, m.Receipt)
			require.NotEmpty(t, m.ID)
			require.False(t, m.SentAt.IsZero())
		}
		require.Equal(t, map[string]string{"request_id": "r0"}, got[0].Attributes)
		errs, err = h.Queue.Delete(ctx, []string{got[0].Receipt, got[1].Receipt, got[2].Receipt})
		require.NoError(t, err)
		require.Equal(t, []error{nil, nil, nil}, errs)
		msgs, err := h.Queue.Receive(ctx, queue.ReceiveOptions{Max: 10, Wait: time.Second})
		require.NoError(t, err)
		require.Empty(t, msgs, "deleted messages came back")
	})

	t.Run("VisibilityTimeoutRedelivers", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		h := newQueue(t, 0, false)
		send(t, h.Queue, "once")
		m := receiveOne(t, h.Queue, time.Second)
		require.Equal(t, 1, m.ReceiveCount)
		// Not deleted: it comes back after the visibility timeout.
		h.pass(1200 * time.Millisecond)
		m2 := receiveOne(t, h.Queue, 30*time.Second)
		require.Equal(t, "once", string(m2.Body))
		require.Equal(t, 2, m2.ReceiveCount)
		require.NotEqual(t, m.Receipt, m2.Receipt)
		errs, err := h.Queue.Delete(ctx, []string{m2.Receipt})
		require.NoError(t, err)
		require.NoError(t, errs[0])
	})

	t.Run("ChangeVisibility", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		h := newQueue(t, 0, false)
		send(t, h.Queue, "held")
		m := receiveOne(t, h.Queue, time.Second)
		errs, err := h.Queue.ChangeVisibility(ctx, []queue.Visibility{{Receipt: m.Receipt, Timeout: 60 * time.Second}})
		require.NoError(t, err)
		require.NoError(t, errs[0])
		msgs, err := h.Queue.Receive(ctx, queue.ReceiveOptions{Max: 1, Wait: 2 * time.Second})
		require.NoError(t, err)
		require.Empty(t, msgs, "an extended message was delivered again")
		// Release it: visible at once.
		errs, err = h.Queue.ChangeVisibility(ctx, []queue.Visibility{{Receipt: m.Receipt, Timeout: 0}})
		require.NoError(t, err)
		require.NoError(t, errs[0])
		m2 := receiveOne(t, h.Queue, 30*time.Second)
		require.Equal(t, "held", string(m2.Body))
		require.Equal(t, 2, m2.ReceiveCount)
	})

	t.Run("LongPollWakesOnSend", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		h := newQueue(t, 0, false)
		done := make(chan []queue.Message, 1)
		go func() {
			msgs, _ := h.Queue.Receive(ctx, queue.ReceiveOptions{Max: 1, Wait: 10 * time.Second, Visibility: 30 * time.Second})
			done <- msgs
		}()
		time.Sleep(300 * time.Millisecond)
		send(t, h.Queue, "late")
		msgs := <-done
		require.Len(t, msgs, 1, "a long poll must return a message sent while it waits")
		require.Equal(t, "late", string(msgs[0].Body))
	})

	t.Run("LongPollHonoursContext", func(t *testing.T) {
		t.Parallel()
		h := newQueue(t, 0, false)
		ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
		defer cancel()
		msgs, err := h.Queue.Receive(ctx, queue.ReceiveOptions{Max: 1, Wait: 20 * time.Second})
		require.Error(t, err)
		require.Empty(t, msgs)
	})

	t.Run("DeadLetterAfterMaxReceives", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		h := newQueue(t, 2, false)
		send(t, h.Queue, "poison")
		m := receiveOne(t, h.Queue, time.Second)
		require.Equal(t, 1, m.ReceiveCount)
		h.pass(1200 * time.Millisecond)
		m = receiveOne(t, h.Queue, time.Second)
		require.Equal(t, 2, m.ReceiveCount)
		h.pass(1200 * time.Millisecond)
		msgs, err := h.Queue.Receive(ctx, queue.ReceiveOptions{Max: 1, Wait: time.Second})
		require.NoError(t, err)
		require.Empty(t, msgs, "a message past maxReceiveCount was delivered")
		n, err := h.DeadLettersFunc(ctx)
		require.NoError(t, err)
		require.Equal(t, 1, n)
	})

	t.Run("ReceiveOptionsOutOfRangeRefused", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		h := newQueue(t, 0, false)
		send(t, h.Queue, "kept")
		for _, o := range []queue.ReceiveOptions{
			{Max: 11}, {Max: -1}, {Max: 1, Wait: 21 * time.Second}, {Max: 1, Wait: -time.Second},
			{Max: 1, Visibility: 13 * time.Hour}, {Max: 1, Visibility: -time.Second},
		} {
			msgs, err := h.Queue.Receive(ctx, o)
			require.ErrorIs(t, err, queue.ErrInvalid, "%+v", o)
			require.Empty(t, msgs)
		}
		require.Equal(t, "kept", string(receiveOne(t, h.Queue, 30*time.Second).Body), "a refused receive took nothing")
	})

	t.Run("DedupID", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		h := newQueue(t, 0, true)
		for i := 0; i < 2; i++ {
			errs, err := h.Queue.Send(ctx, []queue.Outgoing{{Body: []byte(fmt.Sprintf("copy %d", i)), GroupID: "g", DedupID: "same"}})
			require.NoError(t, err)
			require.NoError(t, errs[0])
		}
		msgs, err := Drain(ctx, h.Queue, time.Second)
		require.NoError(t, err)
		require.Len(t, msgs, 1)
		require.Equal(t, "copy 0", string(msgs[0].Body))
	})

	t.Run("BatchLimits", func(t *testing.T) {
		t.Parallel()
		ctx := context.Background()
		h := newQueue(t, 0, false)
		_, err := h.Queue.Send(ctx, make([]queue.Outgoing, 11))
		require.Error(t, err)
		_, err = h.Queue.Delete(ctx, make([]string, 11))
		require.Error(t, err)
		big := make([]byte, queue.MaxMessageBytes+1)
		errs, err := h.Queue.Send(ctx, []queue.Outgoing{{Body: big}, {Body: []byte("ok")}})
		require.NoError(t, err)
		require.ErrorIs(t, errs[0], queue.ErrTooLarge)
		require.NoError(t, errs[1])
	})
}

func send(t *testing.T, q queue.Queue, body string) {
	t.Helper()
	errs, err := q.Send(context.Background(), []queue.Outgoing{{Body: []byte(body)}})
	require.NoError(t, err)
	require.NoError(t, errs[0])
}

// receiveOne waits (up to 20 s) for one message and hides it for vis.
func receiveOne(t *testing.T, q queue.Queue, vis time.Duration) queue.Message {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		msgs, err := q.Receive(context.Background(), queue.ReceiveOptions{Max: 1, Wait: 2 * time.Second, Visibility: vis})
		require.NoError(t, err)
		if len(msgs) == 1 {
			return msgs[0]
		}
	}
	t.Fatal("no message within 20 s")
	return queue.Message{}
}
