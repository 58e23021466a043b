package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine"
	"github.com/verdict-dev/verdict/router"
)

// member is one decision of one job to be scored.
type member struct {
	job *job
	idx int // in job.pending and job.scored
}

// groupByState gathers the pending decisions of jobs into groups that
// share a state (router.GroupKey), across messages, in the order first
// seen. Jobs that failed or did not decode have none.
func groupByState(jobs []*job) [][]member {
	index := map[string]int{}
	var groups [][]member
	for _, j := range jobs {
		if j.err != nil || j.env == nil {
			continue
		}
		for i := range j.pending {
			k := router.GroupKey(j.pending[i].State)
			g, ok := index[k]
			if !ok {
				g = len(groups)
				index[k] = g
				groups = append(groups, nil)
			}
			groups[g] = append(groups[g], member{job: j, idx: i})
		}
	}
	return groups
}

// scoreByState scores jobs' pending decisions with one Scorer call per
// state, the calls in parallel, and records the results in the jobs.
func (w *Worker) scoreByState(ctx context.Context, jobs []*job) {
	// The results are assigned to the jobs one group at a time: a message
	// whose decisions span several states belongs to several groups, and
	// assign writes its job.
	var wg sync.WaitGroup
	var assignMu sync.Mutex
	for _, ms := range groupByState(jobs) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.score(ctx, ms, &assignMu)
		}()
	}
	wg.Wait()
}

// score runs one engine call for decisions that share a state. When that
// call fails for a reason other than load, shutdown or the deadline and
// the decisions come from several messages, each message's decisions are
// scored again on their own, so that one poison message does not drag the
// messages merged with it to the dead-letter queue.
func (w *Worker) score(ctx context.Context, ms []member, assignMu *sync.Mutex) {
	rs, err := w.callScorer(ctx, ms)
	if err != nil && !engine.Retryable(err) && !errors.Is(err, engine.ErrClosed) && ctx.Err() == nil {
		if parts := splitByJob(ms); len(parts) > 1 {
			w.log.Warn("merged engine call failed; scoring its messages one by one", "err", err, "messages", len(parts))
			for _, p := range parts {
				prs, perr := w.callScorer(ctx, p)
				assign(ctx, assignMu, p, prs, perr)
			}
			return
		}
	}
	assign(ctx, assignMu, ms, rs, err)
}

// splitByJob splits a group into one part per job, in the order first
// seen.
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

// callScorer makes one Scorer call within ctx, recovering a panic into an
// error. Once ctx has ended, whatever the call returned is dropped for
// ctx's cause. An engine that says it is closed stops the worker: every
// message would fail the same way.
func (w *Worker) callScorer(ctx context.Context, ms []member) ([]decision.Result, error) {
	ds := make([]decision.Decision, len(ms))
	for i, m := range ms {
		ds[i] = m.job.pending[m.idx]
	}
	start := time.Now()
	rs, err := await(ctx, func() ([]decision.Result, error) { return w.cfg.Scorer.Score(ctx, ds) })
	w.m.scoreSeconds.Observe(time.Since(start).Seconds())
	var pe *panicError
	if errors.As(err, &pe) {
		w.m.panics.Inc()
		w.log.Error("panic in scorer", "panic", fmt.Sprint(pe.value), "stack", string(pe.stack))
	}
	if err == nil && len(rs) != len(ds) {
		err = fmt.Errorf("worker: scorer returned %d results for %d decisions", len(rs), len(ds))
	}
	if ctx.Err() != nil {
		err = context.Cause(ctx)
	}
	if err == nil {
		for i := range rs {
			if closedResult(rs[i].Error) {
				err = fmt.Errorf("decision %q: %w", ds[i].ID, engine.ErrClosed)
				break
			}
		}
	}
	if errors.Is(err, engine.ErrClosed) {
		w.beginStop(fmt.Errorf("worker: scorer: %w", err))
	}
	return rs, err
}

// assign records a scorer call's results (or its failure) in the jobs,
// holding mu. A job keeps its first error; a retryable per-decision error
// becomes the job's error too, so that the message is released and scored
// again.
func assign(ctx context.Context, mu *sync.Mutex, ms []member, rs []decision.Result, err error) {
	mu.Lock()
	defer mu.Unlock()
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
			if ctx.Err() != nil {
				j.err = context.Cause(ctx)
			}
		}
		j.scored[m.idx] = rs[i]
	}
}
