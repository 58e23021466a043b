package main

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/verdict-dev/verdict/auth"
	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/lambda"
	"github.com/verdict-dev/verdict/listen"
	"github.com/verdict-dev/verdict/model"
	"github.com/verdict-dev/verdict/policy"
	"github.com/verdict-dev/verdict/queue"
	"github.com/verdict-dev/verdict/router"
	"github.com/verdict-dev/verdict/sink"
	"github.com/verdict-dev/verdict/worker"
)

func init() {
	register(command{
		name:    "up",
		summary: "run the whole pipeline in one process: front door, local queue, worker, results store",
		runFunc: runUp,
	})
}

// upQueueName is the local queue `verdict up` uses; `verdict worker --queue
// local --data DIR` consumes the same one by default.
const upQueueName = "cpu"

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
	pools       string
	gpuTokens   int
	engine      engineFlags
	log         logFlags
}

func (f *upFlags) register() *flag.FlagSet {
	fs := newFlagSet("up", "up [flags]")
	fs.StringVar(&f.addr, "addr", "127.0.0.1:8080", "listen address HOST:PORT (a non-loopback address needs --api-keys)")
	fs.StringVar(&f.data, "data", ".verdict", "directory for the local queue (queue.db), results (results.db), accepted requests (requests.db) and models/ (a synthesized model)")
	fs.StringVar(&f.policyFile, "policy", "", "policy file (default: the permissive default policy); reloaded on SIGHUP")
	fs.StringVar(&f.apiKeys, "api-keys", "", "accepted API keys (X-Api-Key or Authorization: Bearer), comma-separated, each KEY or KEY=TENANT (default: none, anonymous callers accepted on loopback)")
	fs.IntVar(&f.maxBody, "max-body-bytes", lambda.DefaultMaxBodyBytes, "largest request body; larger ones get 413")
	fs.IntVar(&f.maxState, "max-state-bytes", decision.DefaultLimits().MaxStateBytes, "largest state in a request; larger ones get 413")
	fs.DurationVar(&f.retryAfter, "retry-after", lambda.DefaultRetryAfter, "the Retry-After of 503 answers when the queue fails")
	fs.IntVar(&f.concurrency, "concurrency", worker.DefaultConcurrency, "worker: received batches processed at once")
	fs.DurationVar(&f.visibility, "visibility", worker.DefaultVisibility, "worker: visibility timeout; work held by a killed process is retried after it")
	fs.IntVar(&f.maxReceives, "max-receives", 5, "receives before a message goes to the dead-letter table")
	fs.DurationVar(&f.shutdown, "shutdown-timeout", worker.DefaultShutdownTimeout, "on SIGTERM/SIGINT, time to finish in-flight work and release the rest to the queue; 0: release at once")
	fs.StringVar(&f.synthShape, "synth-shape", "tiny", "without --model: shape of the synthetic model written to DATA/models (seed 1)")
	fs.StringVar(&f.pools, "pools", "cpu", "worker pools, each with its own local queue, engine and worker: cpu, gpu, or cpu,gpu (the router sends decisions by its rules: route, priority interactive, prompt length; the cpu pool then runs with --gpu-layers 0)")
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
	if _, ok := model.Shapes[f.synthShape]; !ok && f.engine.model == "" {
		return fmt.Errorf("flag --synth-shape: unknown shape %q (known: %v)", f.synthShape, model.ShapeNames())
	}
	return nil
}

func runUp(ctx context.Context, args []string) error {
	var f upFlags
	fs := f.register()
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("unexpected argument %q (up takes only flags)", fs.Arg(0))
	}
	if err := f.log.setup(); err != nil {
		return err
	}
	if err := f.check(); err != nil {
		return err
	}
	keys, err := parseAPIKeys(f.apiKeys)
	if err != nil {
		return err
	}
	if err := auth.CheckBind(f.addr, len(keys) > 0, false); err != nil {
		return fmt.Errorf("flag --addr: %w", err)
	}
	if err := os.MkdirAll(f.data, 0o755); err != nil {
		return fmt.Errorf("flag --data: %w", err)
	}

	routes, _ := parsePools(f.pools)
	var res resources
	defer res.close()
	store, err := sink.OpenStore(filepath.Join(f.data, "results.db"))
	if err != nil {
		return fmt.Errorf("flag --data: %w", err)
	}
	res.add(func() { _ = store.Close() })
	reqs, err := openRequestLog(filepath.Join(f.data, "requests.db"))
	if err != nil {
		return fmt.Errorf("flag --data: %w", err)
	}
	res.add(func() { _ = reqs.Close() })
	holder, err := policy.NewHolder(f.policyFile)
	if err != nil {
		return fmt.Errorf("flag --policy: %w", err)
	}
	go holder.WatchSIGHUP(ctx, func(err error) { slog.Error("policy reload failed; keeping the previous policy", "err", err) })

	if f.engine.model == "" {
		path, err := synthModel(f.data, f.synthShape)
		if err != nil {
			return fmt.Errorf("synthesize model: %w", err)
		}
		f.engine.model = path
	}
	pools := make([]*upPool, 0, len(routes))
	for _, route := range routes {
		p, err := f.openPool(route, len(routes) > 1, store, holder, &res)
		if err != nil {
			return err
		}
		pools = append(pools, p)
	}
	id := pools[0].eng.Identity()

	sendTo := map[decision.Route]queue.Sender{}
	workers := map[string]*worker.Worker{}
	for _, p := range pools {
		sendTo[p.route] = p.q
		workers[string(p.route)] = p.w
	}
	front, err := lambda.New(lambda.Config{
		Queues:           sendTo,
		Router:           router.Config{GPUTokenThreshold: f.gpuTokens, CPU: sendTo[decision.RouteCPU] != nil, GPU: sendTo[decision.RouteGPU] != nil},
		AuthorizeFunc:    lambda.PolicyAuthorizer(holder.Current),
		APIKeys:          keys,
		AllowAnonymous:   len(keys) == 0,
		MaxBodyBytes:     f.maxBody,
		Limits:           decision.Limits{MaxStateBytes: f.maxState},
		RetryAfter:       f.retryAfter,
		ResultsLocation:  "/v1/requests/{request_id}",
		DecisionLocation: "/v1/decisions/{decision_id}?request_id={request_id}",
		RecordFunc:       reqs.record,
		Logger:           slog.Default(),
	})
	if err != nil {
		return err
	}
	api := &upAPI{front: front, store: store, reqs: reqs}
	hs, err := listen.New(upRoutes(front, api, worker.PoolsHandler(workers), holder.Handler(), poolsStatus(pools)), listen.Config{Logger: slog.Default()})
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
	slog.Info("verdict up: listening", "addr", ln.Addr().String(), "data", f.data, "model", id.File, "pools", f.pools, "auth", len(keys) > 0)

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

// requestLog remembers accepted requests (requests.db) so that their status
// can be told while their results are not stored yet, across restarts.
type requestLog struct{ db *sql.DB }

const requestLogSchema = `
CREATE TABLE IF NOT EXISTS requests (
	request_id  TEXT    PRIMARY KEY,
	tenant      TEXT    NOT NULL DEFAULT '',
	model       TEXT    NOT NULL DEFAULT '',
	accepted_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS request_decisions (
	request_id  TEXT    NOT NULL,
	decision_id TEXT    NOT NULL,
	position    INTEGER NOT NULL,
	route       TEXT    NOT NULL DEFAULT '',
	PRIMARY KEY (request_id, decision_id)
);
CREATE INDEX IF NOT EXISTS request_decisions_decision ON request_decisions (decision_id);
`

func openRequestLog(path string) (*requestLog, error) {
	db, err := queue.OpenSQLite(path)
	if err != nil {
		return nil, err
	}
	if _, err := db.Exec(requestLogSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("requests log %s: %w", path, err)
	}
	return &requestLog{db: db}, nil
}

func (l *requestLog) Close() error { return l.db.Close() }

// record is the front door's RecordFunc: it runs once the request is
// enqueued. A retried request (same Idempotency-Key) is recorded once.
func (l *requestLog) record(ctx context.Context, c lambda.Caller, a *lambda.Accepted) error {
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO requests (request_id, tenant, model, accepted_at) VALUES (?, ?, ?, ?)`,
		a.RequestID, c.Tenant, a.Model, time.Now().UnixMilli()); err != nil {
		return err
	}
	for i, d := range a.Decisions {
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO request_decisions (request_id, decision_id, position, route) VALUES (?, ?, ?, ?)`,
			a.RequestID, d.ID, i, d.Route); err != nil {
			return err
		}
	}
	return tx.Commit()
}

type loggedRequest struct {
	tenant, model string
	acceptedAt    time.Time
	decisions     []string
}

// get returns a logged request, or found=false.
func (l *requestLog) get(ctx context.Context, id string) (loggedRequest, bool, error) {
	var r loggedRequest
	var ms int64
	err := l.db.QueryRowContext(ctx, `SELECT tenant, model, accepted_at FROM requests WHERE request_id = ?`, id).Scan(&r.tenant, &r.model, &ms)
	if errors.Is(err, sql.ErrNoRows) {
		return r, false, nil
	} else if err != nil {
		return r, false, err
	}
	r.acceptedAt = time.UnixMilli(ms).UTC()
	rows, err := l.db.QueryContext(ctx, `SELECT decision_id FROM request_decisions WHERE request_id = ? ORDER BY position`, id)
	if err != nil {
		return r, false, err
	}
	defer rows.Close()
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			return r, false, err
		}
		r.decisions = append(r.decisions, d)
	}
	return r, true, rows.Err()
}

// requestsOf lists the requests holding a decision id, oldest first.
func (l *requestLog) requestsOf(ctx context.Context, decisionID string) ([]string, error) {
	rows, err := l.db.QueryContext(ctx, `SELECT d.request_id FROM request_decisions d JOIN requests r USING (request_id)
		WHERE d.decision_id = ? ORDER BY r.accepted_at, d.request_id`, decisionID)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}

// upAPI serves the result lookups of `verdict up`.
type upAPI struct {
	front *lambda.Handler
	store *sink.Store
	reqs  *requestLog
}

// decisionStatus is one decision in a status answer.
type decisionStatus struct {
	RequestID string `json:"request_id"`
	ID        string `json:"id"`
	// Status is "queued" or "done".
	Status string `json:"status"`
	// Record is the published result record once done.
	Record json.RawMessage `json:"record,omitempty"`
}

// requestStatus is the answer of GET /v1/requests/{id}.
type requestStatus struct {
	RequestID  string           `json:"request_id"`
	Status     string           `json:"status"`
	Model      string           `json:"model,omitempty"`
	AcceptedAt *time.Time       `json:"accepted_at,omitempty"`
	Done       int              `json:"done"`
	Total      int              `json:"total"`
	Decisions  []decisionStatus `json:"decisions"`
}

// caller authenticates a lookup like a submission; with API keys set, a
// caller sees only its tenant's requests.
func (a *upAPI) caller(rw http.ResponseWriter, r *http.Request) (lambda.Caller, bool) {
	c, resp := a.front.Authenticate(&lambda.Request{Method: r.Method, Path: r.URL.Path, Header: r.Header})
	if resp != nil {
		resp.Write(rw)
		return c, false
	}
	return c, true
}

func internalError(rw http.ResponseWriter, what string, err error) {
	slog.Error("verdict up: "+what, "err", err)
	lambda.ErrorResponse(lambda.ErrorBody{Code: decision.CodeInternal, Message: "internal error"}).Write(rw)
}

func notFound(rw http.ResponseWriter, msg string) {
	lambda.ErrorResponse(lambda.ErrorBody{Code: decision.CodeNotFound, Message: msg}).Write(rw)
}

// status builds the status of one request, or found=false.
func (a *upAPI) status(ctx context.Context, c lambda.Caller, id string) (requestStatus, bool, error) {
	st := requestStatus{RequestID: id, Decisions: []decisionStatus{}}
	logged, known, err := a.reqs.get(ctx, id)
	if err != nil {
		return st, false, err
	}
	stored, err := a.store.ByRequest(ctx, id)
	if err != nil {
		return st, false, err
	}
	if !known && len(stored) == 0 {
		return st, false, nil
	}
	tenant := logged.tenant
	if !known {
		tenant = stored[0].Record.Tenant
	}
	if tenant != c.Tenant {
		return st, false, nil // another tenant's request does not exist for this caller
	}
	byID := map[string]sink.Stored{}
	for _, s := range stored {
		byID[s.Record.DecisionID] = s
	}
	ids := logged.decisions
	if !known {
		for _, s := range stored {
			ids = append(ids, s.Record.DecisionID)
		}
	}
	st.Model = logged.model
	if known {
		t := logged.acceptedAt
		st.AcceptedAt = &t
	}
	for _, d := range ids {
		ds := decisionStatus{RequestID: id, ID: d, Status: "queued"}
		if s, ok := byID[d]; ok {
			ds.Status, ds.Record = "done", s.Body
			st.Done++
		}
		st.Decisions = append(st.Decisions, ds)
	}
	st.Total = len(ids)
	st.Status = "queued"
	if st.Done == st.Total {
		st.Status = "done"
	}
	return st, true, nil
}

// getRequest serves GET /v1/requests/{id}.
func (a *upAPI) getRequest(rw http.ResponseWriter, r *http.Request) {
	c, ok := a.caller(rw, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	st, found, err := a.status(r.Context(), c, id)
	switch {
	case err != nil:
		internalError(rw, "request status", err)
	case !found:
		notFound(rw, fmt.Sprintf("no request %q", id))
	default:
		lambda.JSONResponse(http.StatusOK, st).Write(rw)
	}
}

// getDecision serves GET /v1/decisions/{id}: every decision with that id
// (ids are the caller's and may repeat across requests), or one with
// ?request_id=.
func (a *upAPI) getDecision(rw http.ResponseWriter, r *http.Request) {
	c, ok := a.caller(rw, r)
	if !ok {
		return
	}
	id := r.PathValue("id")
	reqIDs := []string{r.URL.Query().Get("request_id")}
	if reqIDs[0] == "" {
		var err error
		if reqIDs, err = a.reqs.requestsOf(r.Context(), id); err != nil {
			internalError(rw, "decision status", err)
			return
		}
		stored, err := a.store.ByDecision(r.Context(), id)
		if err != nil {
			internalError(rw, "decision status", err)
			return
		}
		seen := map[string]bool{}
		for _, rid := range reqIDs {
			seen[rid] = true
		}
		for _, s := range stored {
			if !seen[s.Record.RequestID] {
				seen[s.Record.RequestID] = true
				reqIDs = append(reqIDs, s.Record.RequestID)
			}
		}
	}
	out := struct {
		ID        string           `json:"id"`
		Decisions []decisionStatus `json:"decisions"`
	}{ID: id, Decisions: []decisionStatus{}}
	for _, rid := range reqIDs {
		st, found, err := a.status(r.Context(), c, rid)
		if err != nil {
			internalError(rw, "decision status", err)
			return
		}
		if !found {
			continue
		}
		for _, d := range st.Decisions {
			if d.ID == id {
				out.Decisions = append(out.Decisions, d)
			}
		}
	}
	if len(out.Decisions) == 0 {
		notFound(rw, fmt.Sprintf("no decision %q", id))
		return
	}
	lambda.JSONResponse(http.StatusOK, out).Write(rw)
}

// upRoutes is the HTTP surface of `verdict up`. Every route but the health
// check (auth.Open) authenticates its caller through the front door, by the
// rules of package auth, and answers a refusal in the front door's shape.
func upRoutes(front *lambda.Handler, api *upAPI, metrics, policyAdmin, status http.Handler) *http.ServeMux {
	mux := http.NewServeMux()
	mux.Handle("POST "+lambda.PathDecisions, front)
	mux.Handle("POST "+lambda.PathSystemOneAsync, front)
	mux.HandleFunc("GET /v1/requests/{id}", api.getRequest)
	mux.HandleFunc("GET /v1/decisions/{id}", api.getDecision)
	mux.Handle("GET /metrics", guarded(front, metrics))
	mux.Handle("GET /v1/status", guarded(front, status))
	mux.Handle("/admin/policy", guarded(front, policyAdmin))
	mux.Handle("GET /healthz", guarded(front, http.HandlerFunc(func(rw http.ResponseWriter, _ *http.Request) {
		lambda.JSONResponse(http.StatusOK, map[string]string{"status": "ok"}).Write(rw)
	})))
	mux.Handle("/", front) // 404 and 405 answers in the front door's shape
	return mux
}

// guarded serves next to the callers the front door accepts, and to anyone
// on the routes auth.Open names; others get the front door's 401.
func guarded(front *lambda.Handler, next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if auth.Open(r.URL.Path) {
			next.ServeHTTP(w, r)
			return
		}
		if _, resp := front.Authenticate(&lambda.Request{Method: r.Method, Path: r.URL.Path, Header: r.Header}); resp != nil {
			resp.Write(w)
			return
		}
		next.ServeHTTP(w, r)
	})
}
