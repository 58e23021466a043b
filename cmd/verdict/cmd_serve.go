package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/listen"
	"github.com/verdict-dev/verdict/internal/server"
	"github.com/verdict-dev/verdict/policy"
)

// sageMakerModelDir is where SageMaker puts the model artifacts.
const sageMakerModelDir = "/opt/ml/model"

// serveTransferMargin is what the listener's body and write timeouts add to
// --timeout, for the transfer before admission and after the answer.
const serveTransferMargin = 10 * time.Second

func init() {
	register(command{
		name:    "serve",
		summary: "serve the SageMaker container contract and the System One API over HTTP",
		runFunc: runServe,
	})
}

// serveFlags are the flags of `verdict serve`.
type serveFlags struct {
	addr          string
	apiKeys       string
	noAuth        bool
	maxBody       int64
	maxState      int
	timeout       time.Duration
	maxConcurrent int
	maxQueue      int
	retryAfter    time.Duration
	drainTimeout  time.Duration
	policyFile    string
	aliases       string
	modelName     string
	logState      bool
	engine        engineFlags
	log           logFlags
}

func (f *serveFlags) register() *flag.FlagSet {
	fs := newFlagSet("serve", "serve [flags]")
	fs.StringVar(&f.addr, "addr", ":8080", "listen address HOST:PORT (a non-loopback address needs --api-keys or --no-auth)")
	fs.StringVar(&f.apiKeys, "api-keys", "", "accepted API `keys` (Authorization: Bearer or X-Api-Key), comma-separated, each KEY or KEY=TENANT (default: none)")
	fs.BoolVar(&f.noAuth, "no-auth", false, "serve without authentication on a non-loopback address (only behind a platform that authenticates callers, such as SageMaker)")
	fs.Int64Var(&f.maxBody, "max-body-bytes", server.DefaultMaxBodyBytes, "largest request body; larger ones get 413")
	fs.IntVar(&f.maxState, "max-state-bytes", decision.DefaultLimits().MaxStateBytes, "largest state in a request; larger ones get 413")
	fs.DurationVar(&f.timeout, "timeout", server.DefaultTimeout, "per-request limit from admission to answer; beyond it 504")
	fs.IntVar(&f.maxConcurrent, "max-concurrent", server.DefaultMaxConcurrent, "requests scoring at once")
	fs.IntVar(&f.maxQueue, "max-queue", server.DefaultMaxQueue, "requests waiting for a scoring slot; beyond them 503 with Retry-After")
	fs.DurationVar(&f.retryAfter, "retry-after", server.DefaultRetryAfter, "the Retry-After of 503 answers (whole seconds)")
	fs.DurationVar(&f.drainTimeout, "drain-timeout", 30*time.Second, "on SIGTERM, how long requests in flight may take to finish")
	fs.StringVar(&f.policyFile, "policy", "", "policy file (default: none; answers carry no outcome); reloaded on SIGHUP")
	fs.StringVar(&f.aliases, "aliases", strings.Join(server.DefaultAliases, ","), "model names System One requests may ask for besides the served one, comma-separated (\"\" = none)")
	fs.StringVar(&f.modelName, "model-name", "", "name reported as the System One \"model\" (default: the model's name, else its file name without .gguf)")
	fs.BoolVar(&f.logState, "log-state", false, "log request bodies, state text included, at debug level (default: never)")
	f.engine.register(fs)
	f.log.register(fs)
	return fs
}

func runServe(ctx context.Context, args []string) error {
	var f serveFlags
	if err := startCommand(f.register(), args, &f.log); err != nil {
		return err
	}
	keys, err := listenerKeys(f.apiKeys, f.addr, &f.noAuth)
	if err != nil {
		return err
	}
	cfg := server.Config{
		ModelName: f.modelName, Aliases: splitList(f.aliases), APIKeys: keys,
		MaxBodyBytes: f.maxBody, Timeout: f.timeout, MaxConcurrent: f.maxConcurrent,
		Limits:   decision.Limits{MaxStateBytes: f.maxState},
		MaxQueue: f.maxQueue, RetryAfter: f.retryAfter, LogState: f.logState,
		Logger: slog.Default(), Registry: server.NewRegistry(),
	}
	switch {
	case f.maxBody <= 0:
		return fmt.Errorf("flag --max-body-bytes: must be > 0, got %d", f.maxBody)
	case f.maxState <= 0:
		return fmt.Errorf("flag --max-state-bytes: must be > 0, got %d", f.maxState)
	case f.timeout <= 0:
		return fmt.Errorf("flag --timeout: must be > 0, got %v", f.timeout)
	case f.maxConcurrent < 1:
		return fmt.Errorf("flag --max-concurrent: must be >= 1, got %d", f.maxConcurrent)
	case f.maxQueue < 0:
		return fmt.Errorf("flag --max-queue: must be >= 0, got %d", f.maxQueue)
	case f.maxQueue == 0:
		cfg.MaxQueue = server.NoQueue
	}
	if f.policyFile != "" {
		h, err := policy.NewHolder(f.policyFile)
		if err != nil {
			return fmt.Errorf("flag --policy: %w", err)
		}
		go h.WatchSIGHUP(ctx, func(err error) { slog.Error("policy reload failed; keeping the previous policy", "error", err) })
		cfg.Policy = h
		cfg.PolicyAdmin = h.Handler()
	}
	srv, err := server.New(cfg)
	if err != nil {
		return err
	}

	// Listen first so that /ping answers 503 while the model loads.
	ln, err := net.Listen("tcp", f.addr)
	if err != nil {
		return fmt.Errorf("flag --addr: %w", err)
	}
	// A request may take --timeout from admission to answer; the body and
	// the answer get as long, plus a margin for the transfer.
	hs, err := listen.New(srv, listen.Config{BodyTimeout: f.timeout + serveTransferMargin,
		WriteTimeout: f.timeout + serveTransferMargin, Logger: slog.Default()})
	if err != nil {
		_ = ln.Close()
		return err
	}
	serveErr := make(chan error, 1)
	go func() { serveErr <- hs.Serve(ln) }()
	slog.Info("listening", "addr", ln.Addr().String(), "auth", len(keys) > 0)

	type loaded struct {
		eng interface {
			Close() error
		}
		err error
	}
	loadDone := make(chan loaded, 1)
	go func() {
		start := time.Now()
		eng, err := f.engine.open(sageMakerModelDir)
		if err != nil {
			loadDone <- loaded{err: err}
			return
		}
		id := eng.Identity()
		sc, err := f.engine.tuned(eng)
		if err != nil {
			_ = eng.Close()
			loadDone <- loaded{err: err}
			return
		}
		cfg.Registry.MustRegister(engineCollectors(eng)...)
		srv.SetScorer(sc, id)
		slog.Info("model loaded", "file", id.File, "sha256", id.SHA256, "name", srv.ModelName(), "seconds", time.Since(start).Seconds())
		loadDone <- loaded{eng: eng}
	}()

	var eng interface{ Close() error }
	var runErr error
	select {
	case <-ctx.Done():
	case err := <-serveErr:
		runErr = fmt.Errorf("serve: %w", err)
	case l := <-loadDone:
		if l.err != nil {
			runErr = fmt.Errorf("load model: %w", l.err)
			break
		}
		eng = l.eng
		select {
		case <-ctx.Done():
		case err := <-serveErr:
			runErr = fmt.Errorf("serve: %w", err)
		}
	}
	slog.Info("shutting down; draining requests in flight", "timeout", f.drainTimeout)
	sctx, cancel := context.WithTimeout(context.Background(), f.drainTimeout)
	defer cancel()
	if err := hs.Shutdown(sctx); err != nil && !errors.Is(err, http.ErrServerClosed) {
		slog.Warn("drain did not finish; closing connections", "error", err)
		_ = hs.Close()
	}
	if eng != nil {
		if err := eng.Close(); err != nil {
			slog.Warn("closing the engine", "error", err)
		}
	}
	return runErr
}

// splitList splits a comma-separated flag value, dropping empty entries.
// It returns a non-nil slice, so "" means "none".
func splitList(s string) []string {
	out := []string{}
	for _, p := range strings.Split(s, ",") {
		if p = strings.TrimSpace(p); p != "" {
			out = append(out, p)
		}
	}
	return out
}
