package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/queue"
)

// receiveRetryDelay is the pause after a failed receive before the next.
const receiveRetryDelay = time.Second

// Worker consumes one queue. Build it with New, run it with Run, stop it
// with Stop (or by cancelling Run's context). The package documentation
// describes its internals; stop.go holds the whole stop sequence.
type Worker struct {
	cfg  Config
	log  *slog.Logger
	m    *metrics
	flow *flow        // how many messages to take (flow.go)
	memo *publishMemo // which sinks already have a message's records (memo.go)
	// escalationPools are Config.Escalate's pools, sorted.
	escalationPools []decision.Route

	// work is the parent of every message's context. It is cancelled with
	// errStopping when a stop abandons the work in flight, and when the
	// worker has finished.
	work       context.Context
	cancelWork context.CancelCauseFunc
	// recv is the receive loop's context: cancelled when a stop begins.
	recv     context.Context
	stopRecv context.CancelFunc

	started   atomic.Bool
	receiving sync.WaitGroup // one per receive whose messages are not all acted on
	closed    chan struct{}  // closed when the worker has finished (see finish)
	closeOnce sync.Once
	releaseBy atomic.Int64 // UnixNano by which an abandoning stop's queue calls end; 0: none

	stopMu   sync.Mutex
	stopping bool  // a stop has begun
	failure  error // the first reason of the worker's own to stop; nil: none
}

// New validates cfg and builds a worker.
func New(cfg Config) (*Worker, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	w := &Worker{
		cfg:    cfg,
		log:    cfg.Logger.With("component", "worker"),
		m:      newMetrics(cfg),
		flow:   newFlow(cfg),
		memo:   newPublishMemo(publishMemoSize),
		closed: make(chan struct{}),
	}
	for p := range cfg.Escalate {
		w.escalationPools = append(w.escalationPools, p)
	}
	sort.Slice(w.escalationPools, func(a, b int) bool { return w.escalationPools[a] < w.escalationPools[b] })
	w.work, w.cancelWork = context.WithCancelCause(context.Background())
	w.recv, w.stopRecv = context.WithCancel(w.work)
	return w, nil
}

// Closed is closed once the worker has stopped and every message it held
// was deleted or released.
func (w *Worker) Closed() <-chan struct{} { return w.closed }

// Run receives and processes messages until the worker is stopped. When
// ctx is cancelled it stops within Config.ShutdownTimeout (see Stop). It
// returns nil after a requested stop (ctx cancelled or Stop called), and
// the cause when the worker stopped by itself: the queue was closed or
// does not exist (queue.ErrClosed, queue.ErrNoQueue), the engine was
// closed (engine.ErrClosed).
func (w *Worker) Run(ctx context.Context) error {
	if !w.started.CompareAndSwap(false, true) {
		return errors.New("worker: Run called twice")
	}
	w.log.Info("worker started", "concurrency", w.cfg.Concurrency, "visibility", w.cfg.Visibility, "max_messages", w.cfg.MaxMessages,
		"message_timeout", w.cfg.MessageTimeout)
	watched := make(chan struct{})
	go func() {
		defer close(watched)
		w.stopWhenDone(ctx)
	}()
	w.receiveLoop()
	w.receiving.Wait()
	w.finish()
	<-watched
	if err := w.failureCause(); err != nil {
		w.log.Error("worker stopped", "err", err)
		return err
	}
	w.log.Info("worker stopped")
	return nil
}

// receiveLoop receives until a stop begins, handing each receive that
// brought messages to a goroutine of its own (processReceived). Each
// receive holds one of the flow's slots until its messages are acted on.
func (w *Worker) receiveLoop() {
	for w.flow.takeSlot(w.recv.Done()) {
		msgs, err := w.cfg.Queue.Receive(w.recv, queue.ReceiveOptions{Max: w.flow.receiveMax(), Wait: w.cfg.Wait, Visibility: w.cfg.Visibility})
		switch {
		case err != nil:
			w.flow.freeSlot()
			if !w.receiveFailed(msgs, err) {
				return
			}
		case len(msgs) == 0:
			w.flow.freeSlot()
		default:
			w.m.received.Add(float64(len(msgs)))
			w.m.inFlight.Add(float64(len(msgs)))
			w.flow.noteReceived(msgs)
			w.receiving.Add(1)
			go w.processReceived(msgs)
		}
	}
}

// receiveFailed handles a failed receive and reports whether to go on
// receiving. A receive cut short by a stop ends the loop; a queue that is
// closed or gone stops the worker; any other failure is counted, logged
// and retried after receiveRetryDelay.
func (w *Worker) receiveFailed(msgs []queue.Message, err error) (again bool) {
	if w.recv.Err() != nil {
		if len(msgs) > 0 {
			// Our queues return no messages with an error, but a message
			// must never be lost.
			w.receiving.Add(1)
			go w.releaseUnprocessed(msgs)
		}
		return false
	}
	if errors.Is(err, queue.ErrClosed) || errors.Is(err, queue.ErrNoQueue) {
		w.beginStop(fmt.Errorf("worker: receive: %w", err))
		return false
	}
	w.m.receiveErrors.Inc()
	w.log.Error("receive failed", "err", err)
	select {
	case <-time.After(receiveRetryDelay):
		return true
	case <-w.recv.Done():
		return false
	}
}
