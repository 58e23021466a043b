package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/http"
	"path/filepath"
	"strings"
	"time"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine/llamacpp"
	"github.com/verdict-dev/verdict/internal/queue"
	"github.com/verdict-dev/verdict/internal/results"
	"github.com/verdict-dev/verdict/internal/sink"
	"github.com/verdict-dev/verdict/internal/tune"
	"github.com/verdict-dev/verdict/internal/uphttp"
	"github.com/verdict-dev/verdict/lambda"
	"github.com/verdict-dev/verdict/policy"
	"github.com/verdict-dev/verdict/worker"
)

// upPool is one of `verdict up`'s worker pools: a local queue named after
// its route, an engine and the worker between them.
type upPool struct {
	route    decision.Route
	q        *queue.Local
	eng      *llamacpp.Engine // nil for a pool scored on a SageMaker endpoint
	endpoint string           // that endpoint's name
	w        *worker.Worker
}

// identity names the pool's model and the device it runs on, for status
// and logs.
func (p *upPool) identity() (file, backend string) {
	if p.eng == nil {
		return "sagemaker:" + p.endpoint, "sagemaker"
	}
	id := p.eng.Identity()
	return id.File, id.Backend
}

// parsePools reads --pools: cpu, gpu, or both, each once.
func parsePools(s string) ([]decision.Route, error) {
	var out []decision.Route
	seen := map[decision.Route]bool{}
	for _, p := range strings.Split(s, ",") {
		r := decision.Route(strings.TrimSpace(p))
		if !r.IsPool() {
			return nil, fmt.Errorf("flag --pools: %q is not a pool (want cpu, gpu or cpu,gpu)", p)
		}
		if seen[r] {
			return nil, fmt.Errorf("flag --pools: %q is named twice", r)
		}
		seen[r] = true
		out = append(out, r)
	}
	return out, nil
}

// openQueues opens each pool's local queue (in DATA/queue.db).
func (f *upFlags) openQueues(routes []decision.Route, res *resources) (map[decision.Route]*queue.Local, error) {
	qs := map[decision.Route]*queue.Local{}
	for _, route := range routes {
		q, err := queue.OpenLocal(queue.LocalConfig{Path: filepath.Join(f.data, "queue.db"), Name: string(route),
			Visibility: f.visibility, MaxReceives: f.maxReceives})
		if err != nil {
			return nil, fmt.Errorf("flag --data: %w", err)
		}
		res.add(func() { _ = q.Close() })
		qs[route] = q
	}
	return qs, nil
}

// openPool loads route's engine and builds its worker on its queue of qs;
// the other queues of qs are where its worker sends the decisions a
// policy escalates. With both pools the cpu one runs on the CPU whatever
// --gpu-layers says; the gpu one offloads as --gpu-layers says (all
// layers by default) and loads --gpu-model when it is given.
func (f *upFlags) openPool(route decision.Route, qs map[decision.Route]*queue.Local, store *results.File, holder *policy.Holder, res *resources) (*upPool, error) {
	q, both := qs[route], len(qs) > 1
	escalate := map[decision.Route]queue.Sender{}
	for r, other := range qs {
		if r != route {
			escalate[r] = other
		}
	}
	ef := f.engine
	if both && route == decision.RouteCPU {
		ef.gpuLayers = 0
	}
	if route == decision.RouteGPU && f.gpuModel != "" {
		ef.model = f.gpuModel
	}
	var (
		sc       worker.Scorer
		eng      *llamacpp.Engine
		stats    func() (int64, int64)
		endpoint string
	)
	if route == decision.RouteGPU && f.gpuSM.engine == engineSageMaker {
		s, err := f.gpuSM.open(context.Background(), "")
		if err != nil {
			return nil, fmt.Errorf("gpu pool: %w", err)
		}
		cfg, err := ef.tuneConfig("", "") // the endpoint's model identity: checked on every result
		if err != nil {
			return nil, err
		}
		sc, endpoint = tune.New(s, cfg), f.gpuSM.endpoint
		slog.Info("scoring on a SageMaker endpoint", "pool", route, "endpoint", f.gpuSM.endpoint, "url", f.gpuSM.url)
	} else {
		start := time.Now()
		var err error
		if eng, err = ef.open(""); err != nil {
			return nil, fmt.Errorf("%s pool: load model: %w", route, err)
		}
		res.add(func() { _ = eng.Close() })
		if sc, err = ef.tuned(eng); err != nil {
			return nil, err
		}
		id := eng.Identity()
		slog.Info("model loaded", "pool", route, "file", id.File, "sha256", id.SHA256, "backend", id.Backend, "seconds", time.Since(start).Seconds())
		if route == decision.RouteGPU && id.Backend == "CPU" {
			slog.Warn("the gpu pool runs on the CPU: this build found no GPU device (see `verdict version`)", "pool", route)
		}
		stats = func() (int64, int64) { s := eng.Stats(); return s.PrefixHits, s.PrefixMisses }
	}
	w, err := worker.New(worker.Config{
		Queue: q, Scorer: sc, Sinks: []sink.Sink{store}, Policy: holder, Pool: route, Escalate: escalate,
		Concurrency: f.concurrency, Visibility: f.visibility, Wait: 5 * time.Second, ShutdownTimeout: noneIfZero(f.shutdown),
		Logger:          slog.Default().With("pool", string(route)),
		PrefixStatsFunc: stats,
	})
	if err != nil {
		return nil, err
	}
	return &upPool{route: route, q: q, eng: eng, endpoint: endpoint, w: w}, nil
}

// poolStatus is one pool in GET /v1/status.
type poolStatus struct {
	Queued      int    `json:"queued"`
	InFlight    int    `json:"in_flight"`
	DeadLetters int    `json:"dead_letters"`
	Backend     string `json:"backend"`
	Model       string `json:"model"`
}

// poolsStatus answers GET /v1/status: each pool's queue depth and the
// device its engine runs on.
func poolsStatus(pools []*upPool) http.Handler {
	return http.HandlerFunc(func(rw http.ResponseWriter, r *http.Request) {
		ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
		defer cancel()
		out := map[string]poolStatus{}
		for _, p := range pools {
			st, err := p.q.Stats(ctx)
			if err != nil {
				uphttp.InternalError(rw, "queue stats", err)
				return
			}
			model, backend := p.identity()
			out[string(p.route)] = poolStatus{Queued: st.Visible, InFlight: st.InFlight, DeadLetters: st.Dead, Backend: backend, Model: model}
		}
		lambda.JSONResponse(http.StatusOK, map[string]any{"pools": out}).Write(rw)
	})
}
