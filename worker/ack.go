package worker

import (
	"context"
	"log/slog"
	"time"

	"github.com/verdict-dev/verdict/internal/queue"
)

// queueOpTimeout bounds a delete or release, which still run while the
// worker stops.
const queueOpTimeout = 15 * time.Second

// act applies each job's queue action, as decide chooses it from the
// job's outcome: deletes in one batch call, releases (visibility set to
// their delay) in another. It runs even while a stop abandons the work in
// flight, until the stop's deadline (see queueContext). A job is marked
// acted first, so that its heartbeat leaves it alone.
func (w *Worker) act(jobs []*job) {
	ctx, cancel := w.queueContext()
	defer cancel()
	stopping := w.work.Err() != nil
	var dels, rels []*job
	var vis []queue.Visibility
	for _, j := range jobs {
		if j.visibilityMu != nil {
			j.visibilityMu.Lock()
			j.acted.Store(true)
			j.visibilityMu.Unlock()
		}
		a := w.decide(j.err, j.msg.ReceiveCount, stopping)
		switch a.verb {
		case verbDelete:
			dels = append(dels, j)
		case verbRelease:
			rels = append(rels, j)
			vis = append(vis, queue.Visibility{Receipt: j.msg.Receipt, Timeout: a.delay})
			w.m.released.WithLabelValues(a.reason).Inc()
			lvl := slog.LevelWarn
			if a.reason == "shutdown" {
				lvl = slog.LevelInfo
			}
			w.log.Log(ctx, lvl, "message released", "message_id", j.msg.ID, "request_id", requestID(j),
				"receive_count", j.msg.ReceiveCount, "reason", a.reason, "delay", a.delay, "err", errString(j.err))
		}
	}
	w.deleteMessages(ctx, dels)
	w.releaseMessages(ctx, rels, vis)
	w.m.inFlight.Sub(float64(len(jobs)))
}

// deleteMessages deletes the messages of jobs whose records are
// published. A message whose delete fails is delivered again.
func (w *Worker) deleteMessages(ctx context.Context, jobs []*job) {
	if len(jobs) == 0 {
		return
	}
	receipts := make([]string, len(jobs))
	for i, j := range jobs {
		receipts[i] = j.msg.Receipt
	}
	errs, err := w.cfg.Queue.Delete(ctx, receipts)
	for i, j := range jobs {
		if e := batchError(errs, err, i); e != nil {
			w.log.Error("delete failed: the message will be delivered again", "message_id", j.msg.ID, "err", e)
			continue
		}
		w.memo.forget(j.msg.ID)
		w.m.deleted.Inc()
	}
}

// releaseMessages sets the visibility of jobs' messages (vis[i] for
// jobs[i]). A message whose release fails comes back when its current
// visibility ends.
func (w *Worker) releaseMessages(ctx context.Context, jobs []*job, vis []queue.Visibility) {
	if len(jobs) == 0 {
		return
	}
	errs, err := w.cfg.Queue.ChangeVisibility(ctx, vis)
	for i, j := range jobs {
		if e := batchError(errs, err, i); e != nil {
			w.log.Error("release failed: the message comes back when its visibility ends", "message_id", j.msg.ID, "err", e)
		}
	}
}

// releaseUnprocessed releases, with visibility 0, messages that a receive
// returned although it was cut short by a stop.
func (w *Worker) releaseUnprocessed(msgs []queue.Message) {
	defer w.receiving.Done()
	jobs := make([]*job, len(msgs))
	for i := range msgs {
		jobs[i] = &job{msg: msgs[i], err: errStopping}
	}
	w.m.inFlight.Add(float64(len(msgs)))
	w.act(jobs)
}

// queueContext bounds a delete or release: queueOpTimeout, and no later
// than an abandoning stop's deadline.
func (w *Worker) queueContext() (context.Context, context.CancelFunc) {
	d := time.Now().Add(queueOpTimeout)
	if by := w.releaseBy.Load(); by != 0 && w.work.Err() != nil {
		if t := time.Unix(0, by); t.Before(d) {
			d = t
		}
	}
	return context.WithDeadline(context.Background(), d)
}

// batchError is the error of item i of a batch queue call: the call's
// own error, else the item's.
func batchError(errs []error, err error, i int) error {
	if err == nil && errs != nil {
		return errs[i]
	}
	return err
}

func requestID(j *job) string {
	if j.env == nil {
		return ""
	}
	return j.env.RequestID
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}
