package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"time"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine"
	"github.com/verdict-dev/verdict/policy"
	"github.com/verdict-dev/verdict/queue"
	"github.com/verdict-dev/verdict/router"
	"github.com/verdict-dev/verdict/sink"
)

// queueOpTimeout bounds a delete or release, which still run while the
// worker stops.
const queueOpTimeout = 15 * time.Second

// Worker consumes one queue. Build it with New, run it with Run, stop it
// with Stop (or by cancelling Run's context).
type Worker struct {
	cfg Config
	log *slog.Logger
	m   *metrics

	work     context.Context // cancelled by a hard stop
	hardStop context.CancelCauseFunc
	recv     context.Context // cancelled when receiving stops
	stopRecv context.CancelFunc

	started  atomic.Bool
	loopDone chan struct{} // closed when the receive loop has returned
	closed   chan struct{} // closed when every batch has finished
	batches  sync.WaitGroup

	ewmaMu  sync.Mutex
	perMsg  time.Duration // moving average of processing time per message
	runOnce sync.Once
}

// New validates cfg and builds a worker.
func New(cfg Config) (*Worker, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	w := &Worker{cfg: cfg, log: cfg.Logger.With("component", "worker"), loopDone: make(chan struct{}), closed: make(chan struct{})}
	w.m = newMetrics(cfg)
	w.work, w.hardStop = context.WithCancelCause(context.Background())
	w.recv, w.stopRecv = context.WithCancel(w.work)
	return w, nil
}

// Closed is closed once the worker has stopped and every message it held
// was deleted or released.
func (w *Worker) Closed() <-chan struct{} { return w.closed }

// Run receives and processes messages until the worker is stopped. When
// ctx is cancelled it stops gracefully within Config.ShutdownTimeout. It
// returns nil after a clean stop.
func (w *Worker) Run(ctx context.Context) error {
	if !w.started.CompareAndSwap(false, true) {
		return errors.New("worker: Run called twice")
	}
	w.log.Info("worker started", "concurrency", w.cfg.Concurrency, "visibility", w.cfg.Visibility, "max_messages", w.cfg.MaxMessages)
	stopDone := make(chan struct{})
	go func() {
		defer close(stopDone)
		select {
		case <-ctx.Done():
			sctx, cancel := context.WithTimeout(context.Background(), w.cfg.ShutdownTimeout)
			defer cancel()
			_ = w.Stop(sctx)
		case <-w.closed:
		}
	}()
	w.loop()
	w.batches.Wait()
	w.finish()
	<-stopDone
	w.log.Info("worker stopped")
	return nil
}

func (w *Worker) finish() {
	w.runOnce.Do(func() {
		w.hardStop(errStopping)
		close(w.closed)
	})
}

// Stop stops receiving and waits for in-flight batches. When ctx ends
// first, the batches are cancelled and their unfinished messages released
// with visibility 0; Stop then waits for those releases and returns
// ctx's error. Calling Stop again (a second signal) with a done context
// releases at once.
func (w *Worker) Stop(ctx context.Context) error {
	w.stopRecv()
	if !w.started.Load() {
		w.finish()
		return nil
	}
	select {
	case <-w.closed:
		return nil
	case <-ctx.Done():
		w.log.Warn("shutdown deadline reached: releasing unfinished messages")
		w.hardStop(errStopping)
		<-w.closed
		return ctx.Err()
	}
}

// loop receives until receiving stops.
func (w *Worker) loop() {
	defer close(w.loopDone)
	sem := make(chan struct{}, w.cfg.Concurrency)
	for {
		select {
		case sem <- struct{}{}:
		case <-w.recv.Done():
			return
		}
		msgs, err := w.cfg.Queue.Receive(w.recv, queue.ReceiveOptions{Max: w.receiveMax(), Wait: w.cfg.Wait, Visibility: w.cfg.Visibility})
		if err != nil {
			<-sem
			if w.recv.Err() != nil {
				if len(msgs) > 0 {
					w.batches.Add(1)
					go w.release(msgs) // never happens with our queues, but never lose a message
				}
				return
			}
			w.m.receiveErrors.Inc()
			w.log.Error("receive failed", "err", err)
			select {
			case <-time.After(time.Second):
			case <-w.recv.Done():
				return
			}
			continue
		}
		if len(msgs) == 0 {
			<-sem
			continue
		}
		w.m.received.Add(float64(len(msgs)))
		w.m.inFlight.Add(float64(len(msgs)))
		w.batches.Add(1)
		go func() {
			defer func() { <-sem }()
			w.processBatch(msgs)
		}()
	}
}

func (w *Worker) release(msgs []queue.Message) {
	defer w.batches.Done()
	jobs := make([]*job, len(msgs))
	for i := range msgs {
		jobs[i] = &job{msg: msgs[i], err: errStopping}
	}
	w.m.inFlight.Add(float64(len(msgs)))
	w.act(jobs)
}

// receiveMax is how many messages to take now: at most MaxMessages, and
// no more than the measured processing time says will finish within half
// the visibility timeout.
func (w *Worker) receiveMax() int {
	w.ewmaMu.Lock()
	per := w.perMsg
	w.ewmaMu.Unlock()
	if per <= 0 {
		return w.cfg.MaxMessages
	}
	n := int((w.cfg.Visibility / 2) / per)
	return max(1, min(n, w.cfg.MaxMessages))
}

func (w *Worker) observe(d time.Duration, n int) {
	if n == 0 {
		return
	}
	per := d / time.Duration(n)
	w.ewmaMu.Lock()
	if w.perMsg == 0 {
		w.perMsg = per
	} else {
		w.perMsg = (w.perMsg*7 + per) / 8
	}
	w.ewmaMu.Unlock()
}

// job is one message being processed.
type job struct {
	msg     queue.Message
	env     *queue.Envelope
	flow    *policy.Flow        // the message's decisions through the policy
	pending []decision.Decision // what the policy left to score
	scored  []decision.Result   // one result per pending decision
	records []sink.Record
	err     error // the outcome; nil = success so far
}

// member is one decision of one job to be scored.
type member struct {
	job *job
	idx int // in job.pending and job.scored
}

func (w *Worker) processBatch(msgs []queue.Message) {
	defer w.batches.Done()
	start := time.Now()
	jobs := make([]*job, len(msgs))
	for i := range msgs {
		jobs[i] = &job{msg: msgs[i]}
	}
	hb := w.heartbeat(jobs)
	groups := map[string][]member{}
	var order []string
	for _, j := range jobs {
		w.protect(j, func() { w.prepare(j) })
		if j.err != nil || j.env == nil {
			continue
		}
		for i := range j.pending {
			k := router.GroupKey(j.pending[i].State)
			if _, ok := groups[k]; !ok {
				order = append(order, k)
			}
			groups[k] = append(groups[k], member{job: j, idx: i})
		}
	}
	// Groups are scored in parallel, but their results are assigned to the
	// jobs one group at a time: a message whose decisions span several
	// states belongs to several groups, and assign writes its job.
	var wg sync.WaitGroup
	var assignMu sync.Mutex
	for _, k := range order {
		wg.Add(1)
		go func(ms []member) {
			defer wg.Done()
			w.score(ms, &assignMu)
		}(groups[k])
	}
	wg.Wait()
	for _, j := range jobs {
		if j.err == nil && j.env != nil {
			w.protect(j, func() { w.finishJob(j) })
		}
	}
	hb()
	w.act(jobs)
	d := time.Since(start)
	w.m.batchSeconds.Observe(d.Seconds())
	w.observe(d, len(msgs))
}

// protect runs f for a job, turning a panic into the job's outcome.
func (w *Worker) protect(j *job, f func()) {
	defer func() {
		if v := recover(); v != nil {
			w.m.panics.Inc()
			j.err = &panicError{value: v, stack: debug.Stack()}
			w.log.Error("panic while processing a message", "message_id", j.msg.ID, "panic", fmt.Sprint(v), "stack", string(j.err.(*panicError).stack))
		}
	}()
	f()
}

// prepare decodes a message and starts its decisions through the policy
// flow (one policy for all of them, even across a reload).
// Invalid messages get their error records published here.
func (w *Worker) prepare(j *job) {
	env, recs, err := decodeMessage(j.msg)
	if err != nil {
		w.m.invalid.Inc()
		w.log.Warn("invalid message", "message_id", j.msg.ID, "receive_count", j.msg.ReceiveCount, "err", err)
		j.records = recs
		j.err = &invalidError{err: err}
		if perr := w.publish(j); perr != nil {
			j.err = perr
		}
		return
	}
	j.env = env
	caller := policy.Caller{Tenant: env.Tenant, APIKeySHA256: env.APIKeySHA256, Metadata: env.Metadata}
	j.flow = w.cfg.Policy.Current().Start(env.Decisions, caller)
	j.pending = j.flow.Pending()
	j.scored = make([]decision.Result, len(j.pending))
	if w.cfg.LogState && w.log.Enabled(context.Background(), slog.LevelDebug) {
		w.log.Debug("message", "message_id", j.msg.ID, "request_id", env.RequestID, "state", env.Decisions[0].State.Render())
	} else {
		w.log.Debug("message", "message_id", j.msg.ID, "request_id", env.RequestID, "decisions", len(env.Decisions), "receive_count", j.msg.ReceiveCount)
	}
}

// score runs one engine call for decisions that share a state. When that
// call fails for a reason other than load or shutdown and the decisions
// come from several messages, each message's decisions are scored again
// on their own, so that one poison message does not drag the messages
// merged with it to the dead-letter queue.
func (w *Worker) score(ms []member, assignMu *sync.Mutex) {
	assign := func(ms []member, rs []decision.Result, err error) {
		assignMu.Lock()
		defer assignMu.Unlock()
		w.assign(ms, rs, err)
	}
	rs, err := w.callScorer(ms)
	if err != nil && !engine.Retryable(err) && !errors.Is(err, errStopping) && w.work.Err() == nil {
		if parts := splitByJob(ms); len(parts) > 1 {
			w.log.Warn("merged engine call failed; scoring its messages one by one", "err", err, "messages", len(parts))
			for _, p := range parts {
				prs, perr := w.callScorer(p)
				assign(p, prs, perr)
			}
			return
		}
	}
	assign(ms, rs, err)
}

func splitByJob(ms []member) [][]member {
	var parts [][]member
	index := map[*job]int{}
	for _, m := range ms {
		i, ok := index[m.job]
		if !ok {
			i = len(parts)
			index[m.job] = i
			parts = append(parts, nil)
		}
		parts[i] = append(parts[i], m)
	}
	return parts
}

// callScorer makes one Scorer call, recovering a panic into an error.
func (w *Worker) callScorer(ms []member) (rs []decision.Result, err error) {
	ds := make([]decision.Decision, len(ms))
	for i, m := range ms {
		ds[i] = m.job.pending[m.idx]
	}
	start := time.Now()
	func() {
		defer func() {
			if v := recover(); v != nil {
				w.m.panics.Inc()
				pe := &panicError{value: v, stack: debug.Stack()}
				w.log.Error("panic in scorer", "panic", fmt.Sprint(v), "stack", string(pe.stack))
				err = pe
			}
		}()
		rs, err = w.cfg.Scorer.Score(w.work, ds)
	}()
	w.m.scoreSeconds.Observe(time.Since(start).Seconds())
	if err == nil && len(rs) != len(ds) {
		err = fmt.Errorf("worker: scorer returned %d results for %d decisions", len(rs), len(ds))
	}
	if err == nil && w.work.Err() != nil {
		err = errStopping
	}
	return rs, err
}

// assign records a scorer call's results (or its failure) in the jobs.
func (w *Worker) assign(ms []member, rs []decision.Result, err error) {
	for i, m := range ms {
		j := m.job
		if err != nil {
			if j.err == nil {
				j.err = err
			}
			continue
		}
		if rs[i].Error != nil && rs[i].Error.Retryable && j.err == nil {
			j.err = rs[i].Error
			if w.work.Err() != nil {
				j.err = errStopping
			}
		}
		j.scored[m.idx] = rs[i]
	}
}

// finishJob finishes the message's policy flow and publishes its records.
// A whole-call scoring failure never gets here: it is the job's error, and
// the message is released rather than settled by on_error.
func (w *Worker) finishJob(j *job) {
	rs, err := j.flow.Finish(j.scored, nil)
	if err != nil {
		j.err = err
		return
	}
	j.records = make([]sink.Record, len(rs))
	for i := range rs {
		j.records[i] = w.record(j.env, i, rs[i])
	}
	j.err = w.publish(j)
}

// publish hands a job's records to every sink. A permanent failure is
// logged and counted but does not hold the message back; a transient one
// becomes the job's outcome.
func (w *Worker) publish(j *job) error {
	if len(j.records) == 0 {
		return nil
	}
	for _, s := range w.cfg.Sinks {
		if err := s.Publish(w.work, j.records); err != nil {
			if w.work.Err() != nil {
				return errStopping
			}
			if permanent(err) {
				w.m.publishErrors.WithLabelValues(s.Name(), "permanent").Inc()
				w.log.Error("publish failed for good", "sink", s.Name(), "message_id", j.msg.ID, "err", err)
				continue
			}
			w.m.publishErrors.WithLabelValues(s.Name(), "transient").Inc()
			return &publishError{sink: s.Name(), err: err}
		}
		w.m.published.WithLabelValues(s.Name()).Add(float64(len(j.records)))
	}
	hasReply := false
	for i := range j.records {
		if len(j.records[i].Reply) > 0 {
			hasReply = true
			break
		}
	}
	if hasReply && !w.webhookIsSink() {
		if w.cfg.Webhook == nil {
			w.m.replyIgnored.Inc()
		} else if err := w.cfg.Webhook.Publish(w.work, j.records); err != nil {
			if w.work.Err() != nil {
				return errStopping
			}
			if !permanent(err) {
				w.m.publishErrors.WithLabelValues("webhook", "transient").Inc()
				return &publishError{sink: "webhook", err: err}
			}
			w.m.publishErrors.WithLabelValues("webhook", "permanent").Inc()
			w.log.Error("webhook failed for good", "message_id", j.msg.ID, "err", err)
		} else {
			w.m.published.WithLabelValues("webhook").Add(float64(len(j.records)))
		}
	}
	for i := range j.records {
		w.m.decisions.WithLabelValues(string(j.records[i].Status)).Inc()
	}
	return nil
}

// act applies each job's action: deletes in batches, releases with their
// delays. It runs even while the worker stops hard.
func (w *Worker) act(jobs []*job) {
	ctx, cancel := context.WithTimeout(context.Background(), queueOpTimeout)
	defer cancel()
	stopping := w.work.Err() != nil
	var dels []*job
	var rels []queue.Visibility
	var relJobs []*job
	for _, j := range jobs {
		a := w.decide(j.err, j.msg.ReceiveCount, stopping)
		reqID := ""
		if j.env != nil {
			reqID = j.env.RequestID
		}
		switch a.verb {
		case verbDelete:
			dels = append(dels, j)
		case verbRelease:
			rels = append(rels, queue.Visibility{Receipt: j.msg.Receipt, Timeout: a.delay})
			relJobs = append(relJobs, j)
			w.m.released.WithLabelValues(a.reason).Inc()
			lvl := slog.LevelWarn
			if a.reason == "shutdown" {
				lvl = slog.LevelInfo
			}
			w.log.Log(ctx, lvl, "message released", "message_id", j.msg.ID, "request_id", reqID,
				"receive_count", j.msg.ReceiveCount, "reason", a.reason, "delay", a.delay, "err", errString(j.err))
		}
	}
	if len(dels) > 0 {
		receipts := make([]string, len(dels))
		for i, j := range dels {
			receipts[i] = j.msg.Receipt
		}
		errs, err := w.cfg.Queue.Delete(ctx, receipts)
		for i, j := range dels {
			e := err
			if e == nil && errs != nil {
				e = errs[i]
			}
			if e != nil {
				w.log.Error("delete failed: the message will be delivered again", "message_id", j.msg.ID, "err", e)
				continue
			}
			w.m.deleted.Inc()
		}
	}
	if len(rels) > 0 {
		errs, err := w.cfg.Queue.ChangeVisibility(ctx, rels)
		for i, j := range relJobs {
			e := err
			if e == nil && errs != nil {
				e = errs[i]
			}
			if e != nil {
				w.log.Error("release failed: the message comes back when its visibility ends", "message_id", j.msg.ID, "err", e)
			}
		}
	}
	w.m.inFlight.Sub(float64(len(jobs)))
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// heartbeat extends the visibility of a batch's messages every
// Config.Heartbeat until the returned function is called.
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
			ctx, cancel := context.WithTimeout(w.work, w.cfg.Heartbeat)
			for start := 0; start < len(jobs); start += queue.MaxBatch {
				end := min(start+queue.MaxBatch, len(jobs))
				vs := make([]queue.Visibility, 0, end-start)
				for _, j := range jobs[start:end] {
					vs = append(vs, queue.Visibility{Receipt: j.msg.Receipt, Timeout: w.cfg.Visibility})
				}
				errs, err := w.cfg.Queue.ChangeVisibility(ctx, vs)
				if err != nil {
					w.log.Warn("visibility extension failed", "err", err)
					continue
				}
				for i, e := range errs {
					if e != nil {
						w.log.Warn("visibility extension failed", "message_id", jobs[start+i].msg.ID, "err", e)
					}
				}
				w.m.heartbeats.Add(float64(len(vs)))
			}
			cancel()
		}
	}()
	return func() { close(done); wg.Wait() }
}

// webhookIsSink reports whether the reply webhook is also one of the
// sinks: it then posts to the reply URLs already, and a second pass would
// deliver every record twice.
func (w *Worker) webhookIsSink() bool {
	if w.cfg.Webhook == nil {
		return false
	}
	for _, s := range w.cfg.Sinks {
		if wh, ok := s.(*sink.Webhook); ok && wh == w.cfg.Webhook {
			return true
		}
	}
	return false
}
