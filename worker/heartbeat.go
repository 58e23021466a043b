package worker

import (
	"context"
	"sync"
	"time"

	"github.com/verdict-dev/verdict/internal/queue"
)

// heartbeat extends the visibility of a receive's messages to
// Config.Visibility every Config.Heartbeat, until they are acted on or the
// returned function is called, so that a slow message is not delivered to
// another worker. A message's deadline (Config.MessageTimeout) ends its
// extensions: its work is abandoned and it is released.
func (w *Worker) heartbeat(jobs []*job) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(w.cfg.Heartbeat)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			w.extend(jobs)
		}
	}()
	return func() { close(done); wg.Wait() }
}

// extend extends the visibility of the jobs not yet acted on, in batches
// of at most queue.MaxBatch. It holds the jobs' visibilityMu, so that no
// job is marked acted (and then deleted or released) while its extension
// is under way.
func (w *Worker) extend(jobs []*job) {
	ctx, cancel := context.WithTimeout(w.work, w.cfg.Heartbeat)
	defer cancel()
	jobs[0].visibilityMu.Lock()
	defer jobs[0].visibilityMu.Unlock()
	for start := 0; start < len(jobs); start += queue.MaxBatch {
		end := min(start+queue.MaxBatch, len(jobs))
		vis := make([]queue.Visibility, 0, end-start)
		held := make([]*job, 0, end-start)
		for _, j := range jobs[start:end] {
			if !j.acted.Load() {
				vis = append(vis, queue.Visibility{Receipt: j.msg.Receipt, Timeout: w.cfg.Visibility})
				held = append(held, j)
			}
		}
		if len(vis) == 0 {
			continue
		}
		errs, err := w.cfg.Queue.ChangeVisibility(ctx, vis)
		if err != nil {
			w.log.Warn("visibility extension failed", "err", err)
			continue
		}
		for i, e := range errs {
			if e != nil {
				w.log.Warn("visibility extension failed", "message_id", held[i].msg.ID, "err", e)
			}
		}
		w.m.heartbeats.Add(float64(len(vis)))
	}
}
