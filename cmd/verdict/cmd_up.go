package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"github.com/prometheus/client_golang/prometheus"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/gguf"
	"github.com/verdict-dev/verdict/internal/listen"
	"github.com/verdict-dev/verdict/internal/quality"
	"github.com/verdict-dev/verdict/internal/queue"
	"github.com/verdict-dev/verdict/internal/results"
	"github.com/verdict-dev/verdict/internal/uphttp"
	"github.com/verdict-dev/verdict/lambda"
	"github.com/verdict-dev/verdict/policy"
	"github.com/verdict-dev/verdict/router"
	"github.com/verdict-dev/verdict/worker"
)

func init() {
	register(command{
		name:    "up",
		summary: "run the whole pipeline in one process: front door, local queue, worker, results store",
		runFunc: runUp,
	})
}

// upFlags are the flags of `verdict up`.
type upFlags struct {
	addr        string
	data        string
	policyFile  string
	apiKeys     string
	maxBody     int
	maxState    int
	retryAfter  time.Duration
	concurrency int
	visibility  time.Duration
	maxReceives int
	shutdown    time.Duration
	synthShape  string
	gpuModel    string
	pools       string
	gpuTokens   int
	gpuSM       sageMakerFlags // the gpu pool on a SageMaker endpoint
	engine      engineFlags
	log         logFlags
}

func (f *upFlags) register() *flag.FlagSet {
	fs := newFlagSet("up", "up [flags]")
	fs.StringVar(&f.addr, "addr", "127.0.0.1:8080", "listen address HOST:PORT (a non-loopback address needs --api-keys)")
	fs.StringVar(&f.data, "data", ".verdict", "directory for the local queue (queue.db), results (results.db), accepted requests (requests.db) and models/ (a synthesized model)")
	fs.StringVar(&f.policyFile, "policy", "", "policy file (default: the permissive default policy); reloaded on SIGHUP")
	fs.StringVar(&f.apiKeys, "api-keys", "", "accepted API keys (X-Api-Key or Authorization: Bearer), comma-separated, each KEY, KEY=TENANT or KEY=TENANT:review (also reads the review inbox) (default: none, anonymous callers accepted on loopback)")
	fs.IntVar(&f.maxBody, "max-body-bytes", lambda.DefaultMaxBodyBytes, "largest request body; larger ones get 413")
	fs.IntVar(&f.maxState, "max-state-bytes", decision.DefaultLimits().MaxStateBytes, "largest state in a request; larger ones get 413")
	fs.DurationVar(&f.retryAfter, "retry-after", lambda.DefaultRetryAfter, "the Retry-After of 503 answers when the queue fails")
	fs.IntVar(&f.concurrency, "concurrency", worker.DefaultConcurrency, "worker: received batches processed at once")
	fs.DurationVar(&f.visibility, "visibility", worker.DefaultVisibility, "worker: visibility timeout; work held by a killed process is retried after it")
	fs.IntVar(&f.maxReceives, "max-receives", 5, "receives before a message goes to the dead-letter table")
	fs.DurationVar(&f.shutdown, "shutdown-timeout", worker.DefaultShutdownTimeout, "on SIGTERM/SIGINT, time to finish in-flight work and release the rest to the queue; 0: release at once")
	fs.StringVar(&f.synthShape, "synth-shape", "tiny", "without --model: shape of the synthetic model written to DATA/models (seed 1)")
	fs.StringVar(&f.gpuModel, "gpu-model", "", "with the gpu pool: its own GGUF model, a bigger one for a cascade (default: the cpu pool's model)")
	fs.StringVar(&f.pools, "pools", "cpu", "worker pools, each with its own local queue, engine and worker: cpu, gpu, or cpu,gpu (the router sends decisions by its rules: route, priority interactive, prompt length; the cpu pool then runs with --gpu-layers 0)")
	fs.StringVar(&f.gpuSM.endpoint, "gpu-sagemaker-endpoint", "", "with the gpu pool: score it on this SageMaker endpoint instead of loading a model (the AWS configuration's region and credentials)")
	fs.StringVar(&f.gpuSM.url, "gpu-sagemaker-url", "", "with --gpu-sagemaker-endpoint: the SageMaker runtime URL, e.g. a verdict serve at http://127.0.0.1:8081 (default: the region's endpoint)")
	fs.IntVar(&f.gpuTokens, "gpu-token-threshold", router.DefaultGPUTokenThreshold, "with both pools: decisions with a longer estimated prompt go to the gpu pool (-1 = never by length)")
	f.engine.register(fs)
	f.log.register(fs)
	return fs
}

func (f *upFlags) check() error {
	switch {
	case f.maxBody <= 0:
		return fmt.Errorf("flag --max-body-bytes: must be > 0, got %d", f.maxBody)
	case f.maxState <= 0:
		return fmt.Errorf("flag --max-state-bytes: must be > 0, got %d", f.maxState)
	case f.retryAfter < 0:
		return fmt.Errorf("flag --retry-after: must be >= 0, got %v", f.retryAfter)
	case f.concurrency < 1:
		return fmt.Errorf("flag --concurrency: must be >= 1, got %d", f.concurrency)
	case f.visibility < time.Second || f.visibility > queue.MaxVisibility:
		return fmt.Errorf("flag --visibility: must be 1s..12h, got %v", f.visibility)
	case f.maxReceives < 1:
		return fmt.Errorf("flag --max-receives: must be >= 1, got %d", f.maxReceives)
	case f.shutdown < 0:
		return fmt.Errorf("flag --shutdown-timeout: must be >= 0, got %v", f.shutdown)
	case f.data == "":
		return errors.New("flag --data: must not be empty")
	case f.gpuTokens == 0 || f.gpuTokens < -1:
		return fmt.Errorf("flag --gpu-token-threshold: must be -1 (never) or >= 1, got %d", f.gpuTokens)
	}
	if _, err := parsePools(f.pools); err != nil {
		return err
	}
	if pools, _ := parsePools(f.pools); f.gpuModel != "" && !slices.Contains(pools, decision.RouteGPU) {
		return fmt.Errorf("flag --gpu-model: needs the gpu pool (--pools cpu,gpu or gpu)")
	}
	if f.gpuModel != "" {
		if _, err := os.Stat(f.gpuModel); err != nil {
			return fmt.Errorf("flag --gpu-model: %w", err)
		}
	}
	if err := f.checkGPUSageMaker(); err != nil {
		return err
	}
	if _, ok := gguf.Shapes[f.synthShape]; !ok && f.engine.model == "" {
		return fmt.Errorf("flag --synth-shape: unknown shape %q (known: %v)", f.synthShape, gguf.ShapeNames())
	}
	return nil
}

// checkGPUSageMaker validates --gpu-sagemaker-endpoint and -url: the gpu
// pool scored on an endpoint, with the worker's default retry settings.
func (f *upFlags) checkGPUSageMaker() error {
	pools, _ := parsePools(f.pools)
	switch {
	case f.gpuSM.endpoint == "" && f.gpuSM.url != "":
		return errors.New("flag --gpu-sagemaker-url: needs --gpu-sagemaker-endpoint")
	case f.gpuSM.endpoint == "":
		return nil
	case !slices.Contains(pools, decision.RouteGPU):
		return errors.New("flag --gpu-sagemaker-endpoint: needs the gpu pool (--pools cpu,gpu or gpu)")
	case f.gpuModel != "":
		return errors.New("flag --gpu-model: the gpu pool scores on --gpu-sagemaker-endpoint and loads no model; give one or the other")
	}
	sm := sageMakerDefaults
	sm.engine, sm.endpoint, sm.url = engineSageMaker, f.gpuSM.endpoint, f.gpuSM.url
	if err := sm.check(nil); err != nil {
		return fmt.Errorf("%s", strings.NewReplacer("flag --sagemaker-", "flag --gpu-sagemaker-").Replace(err.Error()))
	}
	f.gpuSM = sm
	return nil
}

func runUp(ctx context.Context, args []string) error {
	var f upFlags
	if err := startCommand(f.register(), args, &f.log, f.check); err != nil {
		return err
	}
	keys, err := listenerKeys(f.apiKeys, f.addr, nil)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(f.data, 0o755); err != nil {
		return fmt.Errorf("flag --data: %w", err)
	}

	routes, _ := parsePools(f.pools)
	var res resources
	defer res.close()
	store, err := results.OpenLocal(f.data)
	if err != nil {
		return fmt.Errorf("flag --data: %w", err)
	}
	res.add(func() { _ = store.Close() })
	holder, err := policy.NewHolder(f.policyFile)
	if err != nil {
		return fmt.Errorf("flag --policy: %w", err)
	}
	if err := holder.RequirePools(routes, true); err != nil {
		return fmt.Errorf("flag --policy: %w (--pools %s)", err, f.pools)
	}
	go holder.WatchSIGHUP(ctx, func(err error) { slog.Error("policy reload failed; keeping the previous policy", "err", err) })

	if f.engine.model == "" {
		path, err := synthModel(f.data, f.synthShape)
		if err != nil {
			return fmt.Errorf("synthesize model: %w", err)
		}
		f.engine.model = path
	}
	queues, err := f.openQueues(routes, &res)
	if err != nil {
		return err
	}
	pools := make([]*upPool, 0, len(routes))
	for _, route := range routes {
		p, err := f.openPool(route, queues, store.File, holder, &res)
		if err != nil {
			return err
		}
		pools = append(pools, p)
	}
	model, _ := pools[0].identity()

	sendTo := map[decision.Route]queue.Sender{}
	workers := map[string]*worker.Worker{}
	for _, p := range pools {
		sendTo[p.route] = p.q
		workers[string(p.route)] = p.w
	}
	// Live quality from the answers callers give (docs/feedback.md).
	live := quality.New(quality.Config{})
	qreg := prometheus.NewRegistry()
	qreg.MustRegister(live)
	front, err := lambda.New(lambda.Config{
		Queues:         sendTo,
		Router:         router.Config{GPUTokenThreshold: f.gpuTokens, CPU: sendTo[decision.RouteCPU] != nil, GPU: sendTo[decision.RouteGPU] != nil},
		AuthorizeFunc:  lambda.PolicyAuthorizer(holder.Current),
		APIKeys:        keys,
		AllowAnonymous: len(keys) == 0,
		MaxBodyBytes:   f.maxBody,
		Limits:         decision.Limits{MaxStateBytes: f.maxState},
		RetryAfter:     f.retryAfter,
		Results:        store,
		OnFeedback:     live.Observe,
		Logger:         slog.Default(),
	})
	if err != nil {
		return err
	}
	hs, err := listen.New(uphttp.Routes(front, worker.PoolsHandler(workers, qreg), holder.Handler(), poolsStatus(pools)), listen.Config{Logger: slog.Default()})
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return fmt.Errorf("flag --addr: %w", err)
	}

	wctx, stopWorkers := context.WithCancel(context.Background())
	defer stopWorkers()
	workerDone := make(chan error, len(pools))
	for _, p := range pools {
		defer releaseOnSecondSignal(p.w)()
		go func() {
			err := p.w.Run(wctx)
			if err != nil {
				err = fmt.Errorf("%s pool: %w", p.route, err)
			}
			workerDone <- err
		}()
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()
	// Scripts read this line to learn the address (with --addr 127.0.0.1:0).
	slog.Info("verdict up: listening", "addr", ln.Addr().String(), "data", f.data, "model", model, "pools", f.pools, "auth", len(keys) > 0)

	var runErr error
	stopped := 0
	select {
	case <-ctx.Done():
		slog.Info("verdict up: shutting down")
	case err := <-serveErr:
		runErr = fmt.Errorf("serve: %w", err)
	case err := <-workerDone:
		stopped++
		runErr = fmt.Errorf("worker stopped: %v", err)
	}
	// Stop taking requests first, then let the workers finish or release
	// what they hold; queued work stays in queue.db for the next start.
	sctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		_ = hs.Close()
	}
	stopWorkers()
	for ; stopped < len(pools); stopped++ {
		if err := <-workerDone; err != nil && runErr == nil {
			runErr = fmt.Errorf("worker: %w", err)
		}
	}
	for _, p := range pools {
		if st, err := p.q.Stats(context.Background()); err == nil {
			slog.Info("verdict up: stopped", "queue", p.route, "queued", st.Visible+st.InFlight, "dead_letters", st.Dead)
		}
	}
	return runErr
}
