package worker

import (
	"context"
	"errors"
	"time"
)

// How the worker stops (the package documentation tells the same story).
//
// Every stop begins in beginStop, with a reason: errStopRequested when it
// was asked for (Stop, which Run calls when its context is cancelled), or a
// failure of the worker's own (its queue closed or gone, its engine
// closed). beginStop ends receiving; the receives in flight go on. Then:
//
//  1. Drain. Each receive in flight finishes its messages as usual: what
//     was published is deleted, what failed is released with its delay.
//     A stop for a failure waits for this without a deadline.
//  2. Abandon. Only a requested stop whose context is about to end gets
//     here (Stop, shortly before its deadline, or at once when its
//     context is already done): the work context is cancelled with
//     errStopping, the scorer and sink calls still running are abandoned,
//     and every message not yet finished is released with visibility 0.
//     Nothing is deleted unless its records were published.
//  3. Finish. When no receive is left, finish closes Closed, and Run
//     returns nil, or the failure that stopped the worker.

// releaseGrace is the time an abandoning stop keeps for its releases: at
// most this much (a fifth of the time left when that is less) before
// Stop's deadline, or this much after a Stop whose context is already done
// (a second signal, a zero shutdown timeout).
const releaseGrace = 2 * time.Second

// errStopRequested is the reason of a requested stop: Stop was called or
// Run's context was cancelled.
var errStopRequested = errors.New("worker: stop requested")

// beginStop begins stopping the worker, for reason: errStopRequested, or
// a failure that makes the worker stop by itself (Run then returns the
// first such failure). It is the only place that ends receiving; calling
// it again does no harm.
func (w *Worker) beginStop(reason error) {
	w.stopMu.Lock()
	first := !w.stopping
	w.stopping = true
	failed := reason != errStopRequested && w.failure == nil
	if failed {
		w.failure = reason
	}
	w.stopMu.Unlock()
	switch {
	case failed:
		w.log.Error("worker stopping by itself", "err", reason)
	case first:
		w.log.Info("worker stopping: stop requested")
	}
	w.stopRecv()
}

// failureCause is the failure that stopped the worker by itself, or nil.
func (w *Worker) failureCause() error {
	w.stopMu.Lock()
	defer w.stopMu.Unlock()
	return w.failure
}

// stopWhenDone stops the worker when ctx is done, within
// Config.ShutdownTimeout. It returns when the worker has finished.
func (w *Worker) stopWhenDone(ctx context.Context) {
	select {
	case <-ctx.Done():
		sctx, cancel := context.WithTimeout(context.Background(), w.cfg.ShutdownTimeout)
		defer cancel()
		_ = w.Stop(sctx)
	case <-w.closed:
	}
}

// Stop stops receiving and waits for the messages in flight, and never
// longer than ctx allows. Shortly before ctx's deadline (a fifth of the
// time left, at most 2 s, is kept for it) the work still running is
// abandoned — calls that do not return are left behind — and the
// unfinished messages are released with visibility 0; Stop waits for those
// releases until the deadline and returns ctx's error
// (context.DeadlineExceeded when the deadline is near but not past). A ctx
// that is already done (a second signal) releases at once, giving the
// releases at most 2 s. Messages whose release did not finish in time
// come back when their visibility ends. Stop returns nil when everything
// in flight finished in time.
func (w *Worker) Stop(ctx context.Context) error {
	w.beginStop(errStopRequested)
	if !w.started.Load() {
		w.finish()
		return nil
	}
	// 1. Drain until shortly before the deadline.
	deadline, hasDeadline := ctx.Deadline()
	drain := ctx
	if hasDeadline {
		keep := min(releaseGrace, time.Until(deadline)/5)
		var cancel context.CancelFunc
		drain, cancel = context.WithDeadline(ctx, deadline.Add(-keep))
		defer cancel()
	}
	select {
	case <-w.closed:
		return nil
	case <-drain.Done():
	}
	// 2. Abandon what is still running, and wait for its releases.
	by := time.Now().Add(releaseGrace)
	if hasDeadline && deadline.After(time.Now()) {
		by = deadline
	}
	w.abandon(by)
	t := time.NewTimer(time.Until(by))
	defer t.Stop()
	select {
	case <-w.closed:
	case <-t.C:
		w.log.Warn("shutdown deadline passed before every release was made: those messages come back when their visibility ends")
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	return context.DeadlineExceeded
}

// abandon cancels the work in flight: every message's context ends with
// errStopping, so its calls are abandoned and act releases it with
// visibility 0 (see decide). The queue calls of those releases end by by.
func (w *Worker) abandon(by time.Time) {
	w.setReleaseBy(by)
	w.log.Warn("shutdown deadline reached: releasing unfinished messages")
	w.cancelWork(errStopping)
}

// setReleaseBy lowers the time by which an abandoning stop's queue calls
// end.
func (w *Worker) setReleaseBy(t time.Time) {
	n := t.UnixNano()
	for {
		old := w.releaseBy.Load()
		if old != 0 && old <= n {
			return
		}
		if w.releaseBy.CompareAndSwap(old, n) {
			return
		}
	}
}

// finish is the end of every stop: the receive loop and every receive
// have returned (or Run never started), so nothing uses the work context
// any more; it is cancelled and Closed is closed.
func (w *Worker) finish() {
	w.closeOnce.Do(func() {
		w.cancelWork(errStopping)
		close(w.closed)
	})
}
