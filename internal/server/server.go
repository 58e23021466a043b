package server

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"mime"
	"net/http"
	"os"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine"
	"github.com/verdict-dev/verdict/internal/auth"
	"github.com/verdict-dev/verdict/policy"
)

// RequestIDHeader carries each request's id; System One clients surface it.
const RequestIDHeader = "x-typesafe-request-id"

// Server is the HTTP handler. It is safe for concurrent use.
type Server struct {
	cfg     Config
	ready   atomic.Pointer[readyState]
	adm     *admission
	metrics *metrics
	promh   http.Handler
	auth    *auth.Authenticator
}

// readyState is what SetScorer installs.
type readyState struct {
	scorer engine.Scorer
	model  decision.ModelIdentity
	name   string
}

// New builds a Server from cfg.
func New(cfg Config) (*Server, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	s := &Server{cfg: cfg, adm: newAdmission(cfg.MaxConcurrent, cfg.MaxQueue)}
	// Without keys authentication is off: CheckBind keeps such a server on
	// loopback unless the platform in front authenticates.
	a, err := auth.New(cfg.APIKeys, len(cfg.APIKeys) == 0)
	if err != nil {
		return nil, fmt.Errorf("%w: APIKeys: %w", ErrConfig, err)
	}
	s.auth = a
	reg := cfg.Registry
	if reg == nil {
		reg = NewRegistry()
	}
	s.metrics = newMetrics(reg, s)
	s.promh = promhttp.HandlerFor(reg, promhttp.HandlerOpts{})
	if cfg.Scorer != nil {
		s.SetScorer(cfg.Scorer, cfg.Model)
	}
	return s, nil
}

// SetScorer installs the scorer and the identity of its model once the
// model is loaded: /ping turns 200 and scoring routes start answering.
func (s *Server) SetScorer(sc engine.Scorer, model decision.ModelIdentity) {
	s.ready.Store(&readyState{scorer: sc, model: model, name: s.cfg.modelName(model)})
}

// Ready reports whether a scorer is installed.
func (s *Server) Ready() bool { return s.ready.Load() != nil }

// ModelName is the name System One answers report ("" while loading
// unless Config.ModelName is set).
func (s *Server) ModelName() string {
	if st := s.ready.Load(); st != nil {
		return st.name
	}
	return s.cfg.ModelName
}

// reqState is what the handler learns about one request, for its log line
// and metrics.
type reqState struct {
	id               string
	route            string
	tenant           string
	apiKey           string
	format           string
	decisions        int
	errCode          string
	sagemakerRuntime bool
	body             []byte // logged only with Config.LogState
}

// statusWriter records the status and size of an answer.
type statusWriter struct {
	http.ResponseWriter
	status int
	bytes  int
}

func (w *statusWriter) WriteHeader(code int) {
	if w.status == 0 {
		w.status = code
	}
	w.ResponseWriter.WriteHeader(code)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *statusWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func (w *statusWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	n, err := w.ResponseWriter.Write(b)
	w.bytes += n
	return n, err
}

// ServeHTTP routes a request, then logs it and counts it.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	rs := &reqState{id: s.cfg.RequestIDFunc()}
	sw := &statusWriter{ResponseWriter: w}
	sw.Header().Set(RequestIDHeader, rs.id)
	defer func() {
		if p := recover(); p != nil {
			s.cfg.Logger.Error("panic while serving", "request_id", rs.id, "panic", fmt.Sprint(p))
			if sw.status == 0 {
				s.writeError(sw, rs, newAPIError(decision.CodeInternal, "internal error"))
			}
		}
		s.finish(r, rs, sw, start)
	}()
	s.route(sw, r, rs)
}

func (s *Server) finish(r *http.Request, rs *reqState, sw *statusWriter, start time.Time) {
	elapsed := time.Since(start)
	route := rs.route
	if route == "" {
		route = "unknown"
	}
	s.metrics.requests.WithLabelValues(route, fmt.Sprint(sw.status)).Inc()
	s.metrics.duration.WithLabelValues(route).Observe(elapsed.Seconds())
	if route == "ping" || route == "metrics" {
		return // health checks and scrapes would drown the log
	}
	attrs := []slog.Attr{
		slog.String("request_id", rs.id), slog.String("method", r.Method),
		slog.String("path", r.URL.Path), slog.Int("status", sw.status),
		slog.Float64("ms", float64(elapsed.Microseconds())/1000),
		slog.Int64("bytes_in", max(r.ContentLength, 0)), slog.Int("bytes_out", sw.bytes),
	}
	if rs.format != "" {
		attrs = append(attrs, slog.String("format", rs.format), slog.Int("decisions", rs.decisions))
	}
	if rs.tenant != "" {
		attrs = append(attrs, slog.String("tenant", rs.tenant))
	}
	if rs.errCode != "" {
		attrs = append(attrs, slog.String("error", rs.errCode))
	}
	s.cfg.Logger.LogAttrs(r.Context(), slog.LevelInfo, "request", attrs...)
	if s.cfg.LogState && rs.body != nil {
		s.cfg.Logger.LogAttrs(r.Context(), slog.LevelDebug, "request body",
			slog.String("request_id", rs.id), slog.String("body", string(rs.body)))
	}
}

// route dispatches on the path, then on the method.
func (s *Server) route(w http.ResponseWriter, r *http.Request, rs *reqState) {
	path := r.URL.Path
	var allow string
	var h func(http.ResponseWriter, *http.Request, *reqState)
	switch {
	case path == "/ping":
		rs.route, allow, h = "ping", "GET, HEAD", s.handlePing
	case path == "/invocations":
		rs.route, allow, h = "invocations", "POST", s.handleInvocations
	case strings.HasPrefix(path, "/endpoints/") && strings.HasSuffix(path, "/invocations"):
		const pre, suf = len("/endpoints/"), len("/invocations")
		if len(path) <= pre+suf || strings.Contains(path[pre:len(path)-suf], "/") {
			break
		}
		rs.route, allow, h = "endpoint_invocations", "POST", s.handleInvocations
		rs.sagemakerRuntime = true
	case path == "/v1/systemone":
		rs.route, allow, h = "systemone", "POST", s.handleSystemOne
	case path == "/v1/models":
		rs.route, allow, h = "models", "GET, HEAD", s.handleModels
	case path == "/metrics":
		rs.route, allow, h = "metrics", "GET, HEAD", s.handleMetrics
	case path == "/admin/policy" && s.cfg.PolicyAdmin != nil:
		rs.route, allow = "policy_admin", "GET, HEAD, POST"
		h = func(w http.ResponseWriter, r *http.Request, _ *reqState) { s.cfg.PolicyAdmin.ServeHTTP(w, r) }
	}
	if h == nil {
		s.writeError(w, rs, newAPIError(decision.CodeNotFound, "no route for %s", path))
		return
	}
	if !methodAllowed(allow, r.Method) {
		e := newAPIError(decision.CodeMethodNotAllowed, "%s does not accept %s (allowed: %s)", path, r.Method, allow)
		e.allow = allow
		s.writeError(w, rs, e)
		return
	}
	if !auth.Open(path) {
		c, err := s.auth.Check(r.Header, "")
		if err != nil {
			w.Header().Set("WWW-Authenticate", auth.Challenge)
			s.writeError(w, rs, newAPIError(decision.CodeUnauthorized, "%s", auth.Message(err)))
			return
		}
		rs.tenant, rs.apiKey = c.Tenant, c.Key
	}
	h(w, r, rs)
}

func methodAllowed(allow, method string) bool {
	for _, m := range strings.Split(allow, ", ") {
		if m == method {
			return true
		}
	}
	return false
}

func (s *Server) handlePing(w http.ResponseWriter, _ *http.Request, rs *reqState) {
	if !s.Ready() {
		s.writeError(w, rs, loadingError())
		return
	}
	writeJSON(w, http.StatusOK, []byte(`{"status":"ok"}`))
}

func (s *Server) handleMetrics(w http.ResponseWriter, r *http.Request, _ *reqState) {
	s.promh.ServeHTTP(w, r)
}

// readBody checks the content type and reads the body within the limit.
func (s *Server) readBody(w http.ResponseWriter, r *http.Request) ([]byte, *apiError) {
	if ct := r.Header.Get("Content-Type"); ct != "" {
		mt, _, err := mime.ParseMediaType(ct)
		if err != nil || !jsonMediaType(mt) {
			e := newAPIError(decision.CodeUnsupportedMediaType, "content type %q is not accepted; send application/json", ct)
			e.contract = "Content-Type must be application/json (got " + strconv.Quote(ct) + ")"
			return nil, e
		}
	}
	if r.ContentLength > s.cfg.MaxBodyBytes {
		return nil, newAPIError(decision.CodeTooLarge, "body is %d bytes, limit is %d", r.ContentLength, s.cfg.MaxBodyBytes)
	}
	// A slow sender must not hold its admission slot for longer than a
	// request may take.
	rc := http.NewResponseController(w)
	_ = rc.SetReadDeadline(time.Now().Add(s.cfg.Timeout))
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, s.cfg.MaxBodyBytes))
	if err == nil {
		// Keep-alive: the next request on this connection starts afresh. (On
		// error the deadline stays, so the server's drain of the unread body
		// cannot block.)
		_ = rc.SetReadDeadline(time.Time{})
	}
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return nil, newAPIError(decision.CodeTooLarge, "body is larger than the limit of %d bytes", s.cfg.MaxBodyBytes)
		}
		if errors.Is(err, os.ErrDeadlineExceeded) {
			e := newAPIError(decision.CodeTimeout, "the body did not arrive within %v", s.cfg.Timeout)
			e.status = http.StatusRequestTimeout // the client was slow, not the server
			return nil, e
		}
		return nil, newAPIError(decision.CodeMalformed, "reading the body: %v", err)
	}
	return body, nil
}

// jsonMediaType accepts application/json, any +json type, text/json, and
// the generic binary types SageMaker clients send when none is given.
func jsonMediaType(mt string) bool {
	switch mt {
	case "application/json", "text/json", "application/octet-stream", "binary/octet-stream":
		return true
	}
	return strings.HasPrefix(mt, "application/") && strings.HasSuffix(mt, "+json")
}

// admit runs the admission steps common to every scoring route: the model
// must be loaded and the server not full. On success the caller must call
// the returned leave function.
func (s *Server) admit(w http.ResponseWriter, rs *reqState) (*readyState, func(), bool) {
	// A refusal is answered before the body is read: close the connection
	// after it, or net/http would first wait to drain the unread body of a
	// sender that has not sent it yet.
	st := s.ready.Load()
	if st == nil {
		w.Header().Set("Connection", "close")
		s.metrics.rejected.WithLabelValues("loading").Inc()
		s.writeError(w, rs, loadingError())
		return nil, nil, false
	}
	if !s.adm.enter() {
		w.Header().Set("Connection", "close")
		s.metrics.rejected.WithLabelValues("queue_full").Inc()
		s.writeError(w, rs, busyError("the server is at capacity (%d requests); retry later", s.adm.limit))
		return nil, nil, false
	}
	return st, s.adm.leave, true
}

// score runs one request's decisions through the policy flow (or straight
// through the scorer without a policy), inside a scoring slot. It returns
// one result per decision, or the error the whole request gets: a failed
// scoring call answers 503/504/500, never on_error outcomes.
func (s *Server) score(ctx context.Context, st *readyState, ds []decision.Decision, c policy.Caller) ([]decision.Result, *apiError) {
	if err := s.adm.acquire(ctx); err != nil {
		return nil, scoreError(err, s.cfg.Timeout)
	}
	defer s.adm.release()
	var rs []decision.Result
	var err error
	if s.cfg.Policy == nil {
		rs, err = st.scorer.Score(ctx, ds)
	} else {
		rs, err = s.cfg.Policy.Current().Apply(ctx, c, ds, st.scorer.Score)
	}
	if e := s.checkScore(err, len(rs), len(ds)); e != nil {
		return nil, e
	}
	return rs, nil
}

func (s *Server) checkScore(err error, got, want int) *apiError {
	if err != nil {
		if errors.Is(err, engine.ErrBusy) {
			s.metrics.rejected.WithLabelValues("engine_busy").Inc()
		}
		return scoreError(err, s.cfg.Timeout)
	}
	if got != want {
		return newAPIError(decision.CodeEngine, "the scorer returned %d results for %d decisions", got, want)
	}
	return nil
}

// newRequestID returns "req_" and 24 random hex digits.
func newRequestID() string {
	var b [12]byte
	_, _ = rand.Read(b[:])
	return "req_" + hex.EncodeToString(b[:])
}
