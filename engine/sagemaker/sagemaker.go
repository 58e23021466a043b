package sagemaker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	awsconfig "github.com/aws/aws-sdk-go-v2/config"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime/types"
	smithyhttp "github.com/aws/smithy-go/transport/http"

	"github.com/verdict-dev/verdict/client"
	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine"
)

// Sentinel errors.
var (
	// ErrConfig: a Config field is invalid; the message names it.
	ErrConfig = errors.New("sagemaker: invalid config")
	// ErrEndpoint: the endpoint refused a request in a way retrying will not
	// change (a 4xx such as ModelError or ValidationError).
	ErrEndpoint = errors.New("sagemaker: endpoint refused the request")
	// ErrBadResponse: the endpoint answered 200 with a body that is not a
	// verdict batch result for the request.
	ErrBadResponse = errors.New("sagemaker: bad response")
)

// InvokeAPI is the part of the SageMaker runtime client the Scorer uses;
// *sagemakerruntime.Client satisfies it.
type InvokeAPI interface {
	InvokeEndpoint(ctx context.Context, in *sagemakerruntime.InvokeEndpointInput, optFns ...func(*sagemakerruntime.Options)) (*sagemakerruntime.InvokeEndpointOutput, error)
}

// Config configures a Scorer. The zero value of a field means its default,
// given at the end of the field's comment.
type Config struct {
	// EndpointName is the SageMaker endpoint to invoke. Required.
	EndpointName string
	// Client invokes the endpoint. Defaults to a client built by NewClient
	// from the default AWS configuration and EndpointURL.
	Client InvokeAPI
	// EndpointURL overrides the SageMaker runtime URL, e.g. a local
	// `verdict serve` (http://127.0.0.1:8080). Used only when Client is
	// nil. Defaults to the region's endpoint.
	EndpointURL string
	// TargetVariant, TargetModel and InferenceComponentName are passed to
	// InvokeEndpoint when set. Default to none.
	TargetVariant, TargetModel, InferenceComponentName string
	// PrefixAwareID is the routing hint of endpoints with PREFIX_AWARE
	// routing (one identifier per application). Defaults to none.
	PrefixAwareID string
	// MaxBatch bounds the decisions of one request (the endpoint's batch
	// limit). Defaults to 64.
	MaxBatch int
	// Concurrency bounds the requests one Score call has in flight.
	// Defaults to 4.
	Concurrency int
	// MaxAttempts bounds the attempts of one request, the first included.
	// Defaults to 5.
	MaxAttempts int
	// MaxElapsed bounds the time one request may spend retrying: no retry
	// starts whose wait would end later. Defaults to 30 s.
	MaxElapsed time.Duration
	// BaseDelay is the first backoff; each retry doubles it. Defaults to 100 ms.
	BaseDelay time.Duration
	// MaxDelay caps one exponential backoff wait. Defaults to 5 s.
	MaxDelay time.Duration
	// MaxRetryAfter caps how long a Retry-After header is honoured.
	// Defaults to 30 s.
	MaxRetryAfter time.Duration
	// AttemptTimeout bounds one attempt; an attempt that runs past it is
	// retried. Defaults to 60 s.
	AttemptTimeout time.Duration
	// Logger receives a line per retry. Defaults to slog.Default().
	Logger *slog.Logger
}

func (c Config) withDefaults() Config {
	def := func(v *int, d int) {
		if *v == 0 {
			*v = d
		}
	}
	defd := func(v *time.Duration, d time.Duration) {
		if *v == 0 {
			*v = d
		}
	}
	def(&c.MaxBatch, 64)
	def(&c.Concurrency, 4)
	def(&c.MaxAttempts, 5)
	defd(&c.MaxElapsed, 30*time.Second)
	defd(&c.BaseDelay, 100*time.Millisecond)
	defd(&c.MaxDelay, 5*time.Second)
	defd(&c.MaxRetryAfter, 30*time.Second)
	defd(&c.AttemptTimeout, 60*time.Second)
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	return c
}

// validate names the first bad field (after defaults).
func (c Config) validate() error {
	switch {
	case strings.TrimSpace(c.EndpointName) == "":
		return fmt.Errorf("%w: EndpointName is required", ErrConfig)
	case c.MaxBatch < 1:
		return fmt.Errorf("%w: MaxBatch must be >= 1, got %d", ErrConfig, c.MaxBatch)
	case c.Concurrency < 1:
		return fmt.Errorf("%w: Concurrency must be >= 1, got %d", ErrConfig, c.Concurrency)
	case c.MaxAttempts < 1:
		return fmt.Errorf("%w: MaxAttempts must be >= 1, got %d", ErrConfig, c.MaxAttempts)
	case c.MaxElapsed < 0:
		return fmt.Errorf("%w: MaxElapsed must be > 0, got %v", ErrConfig, c.MaxElapsed)
	case c.BaseDelay < 0:
		return fmt.Errorf("%w: BaseDelay must be > 0, got %v", ErrConfig, c.BaseDelay)
	case c.MaxDelay < c.BaseDelay:
		return fmt.Errorf("%w: MaxDelay (%v) must be >= BaseDelay (%v)", ErrConfig, c.MaxDelay, c.BaseDelay)
	case c.MaxRetryAfter < 0:
		return fmt.Errorf("%w: MaxRetryAfter must be >= 0, got %v", ErrConfig, c.MaxRetryAfter)
	case c.AttemptTimeout < 0:
		return fmt.Errorf("%w: AttemptTimeout must be > 0, got %v", ErrConfig, c.AttemptTimeout)
	}
	return nil
}

// Scorer scores decisions on a SageMaker endpoint. It is safe for
// concurrent use.
type Scorer struct {
	cfg Config
}

// New returns a Scorer. ctx is used only to load the AWS configuration
// when cfg.Client is nil.
func New(ctx context.Context, cfg Config) (*Scorer, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.Client == nil {
		c, err := NewClient(ctx, cfg.EndpointURL)
		if err != nil {
			return nil, err
		}
		cfg.Client = c
	}
	return &Scorer{cfg: cfg}, nil
}

// NewClient builds a SageMaker runtime client from the default AWS
// configuration (environment, shared files, instance role) with the SDK's
// retryer switched off; endpointURL, when set, replaces the regional URL.
func NewClient(ctx context.Context, endpointURL string) (*sagemakerruntime.Client, error) {
	awsCfg, err := awsconfig.LoadDefaultConfig(ctx, awsconfig.WithRetryer(func() aws.Retryer { return aws.NopRetryer{} }))
	if err != nil {
		return nil, fmt.Errorf("sagemaker: load AWS config: %w", err)
	}
	return sagemakerruntime.NewFromConfig(awsCfg, func(o *sagemakerruntime.Options) {
		if endpointURL != "" {
			o.BaseEndpoint = aws.String(endpointURL)
		}
		noSDKRetries(o)
	}), nil
}

// noSDKRetries switches the SDK's retries off (they would multiply ours).
func noSDKRetries(o *sagemakerruntime.Options) {
	o.Retryer = aws.NopRetryer{}
	o.RetryMaxAttempts = 1
}

// batchRequest and batchResponse are verdict's SemIf batch shape.
type batchRequest struct {
	Decisions []decision.Decision `json:"decisions"`
}

type batchResponse struct {
	Results []decision.Result `json:"results"`
}

// Score sends the decisions, grouped by state, to the endpoint and returns
// one result per decision in input order. It fails as a whole (wrapping
// engine.ErrUnavailable) when a request exhausted its retries, or with the
// context's error when ctx ends.
func (s *Scorer) Score(ctx context.Context, ds []decision.Decision) ([]decision.Result, error) {
	out := make([]decision.Result, len(ds))
	chunks := s.chunks(ds)
	sem := make(chan struct{}, s.cfg.Concurrency)
	var wg sync.WaitGroup
	var mu sync.Mutex
	var firstErr error
	for _, idx := range chunks {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			err := s.scoreChunk(ctx, ds, idx, out)
			if err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if firstErr != nil {
		return nil, firstErr
	}
	if err := context.Cause(ctx); err != nil {
		return nil, err
	}
	return out, nil
}

// chunks groups decision indexes by state, in first-seen order, and cuts
// each group into requests of at most MaxBatch.
func (s *Scorer) chunks(ds []decision.Decision) [][]int {
	var order []string
	groups := map[string][]int{}
	for i := range ds {
		k := string(ds[i].State.Canonical())
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], i)
	}
	var out [][]int
	for _, k := range order {
		g := groups[k]
		for len(g) > 0 {
			n := min(len(g), s.cfg.MaxBatch)
			out = append(out, g[:n:n])
			g = g[n:]
		}
	}
	return out
}

// scoreChunk sends one request and writes its results into out.
func (s *Scorer) scoreChunk(ctx context.Context, ds []decision.Decision, idx []int, out []decision.Result) error {
	req := batchRequest{Decisions: make([]decision.Decision, len(idx))}
	ids := map[string]bool{}
	unique := true
	for j, i := range idx {
		req.Decisions[j] = ds[i]
		id := ds[i].ID
		if id == "" || ids[id] {
			unique = false
		}
		ids[id] = true
	}
	if !unique { // the batch shape needs unique ids; positions map results back
		for j := range req.Decisions {
			req.Decisions[j].ID = strconv.Itoa(j)
		}
	}
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("sagemaker: encode request: %w", err)
	}
	respBody, err := s.invoke(ctx, body)
	fail := func(err error) {
		for _, i := range idx {
			out[i] = engine.ErrorResult(&ds[i], err)
		}
	}
	switch {
	case errors.Is(err, ErrEndpoint):
		fail(err)
		return nil
	case err != nil:
		return err
	}
	var resp batchResponse
	if err := json.Unmarshal(respBody, &resp); err != nil {
		fail(fmt.Errorf("%w: %w (body: %s)", ErrBadResponse, err, bodyPreview(respBody)))
		return nil
	}
	if len(resp.Results) != len(idx) {
		fail(fmt.Errorf("%w: %d results for %d decisions", ErrBadResponse, len(resp.Results), len(idx)))
		return nil
	}
	for j, i := range idx {
		r := resp.Results[j]
		r.ID = ds[i].ID
		out[i] = r
	}
	return nil
}

// invoke calls InvokeEndpoint with retries and returns the response body.
func (s *Scorer) invoke(ctx context.Context, body []byte) ([]byte, error) {
	in := &sagemakerruntime.InvokeEndpointInput{
		EndpointName: aws.String(s.cfg.EndpointName),
		Body:         body,
		ContentType:  aws.String("application/json"),
		Accept:       aws.String("application/json"),
	}
	optional := func(v string) *string {
		if v == "" {
			return nil
		}
		return aws.String(v)
	}
	in.TargetVariant = optional(s.cfg.TargetVariant)
	in.TargetModel = optional(s.cfg.TargetModel)
	in.InferenceComponentName = optional(s.cfg.InferenceComponentName)
	in.PrefixAwareId = optional(s.cfg.PrefixAwareID)

	policy := client.Retry{MaxAttempts: s.cfg.MaxAttempts, BaseDelay: s.cfg.BaseDelay, MaxDelay: s.cfg.MaxDelay,
		MaxRetryAfter: s.cfg.MaxRetryAfter, MaxElapsed: s.cfg.MaxElapsed}
	var last error
	out, attempts, err := client.Do(ctx, policy, func(ctx context.Context) ([]byte, error) {
		actx, cancel := context.WithTimeout(ctx, s.cfg.AttemptTimeout)
		defer cancel()
		resp, err := s.cfg.Client.InvokeEndpoint(actx, in, noSDKRetries)
		if err == nil {
			return resp.Body, nil
		}
		if ctx.Err() != nil { // the caller gave up: not ours to retry
			return nil, context.Cause(ctx)
		}
		retryable, wait := classify(err)
		if !retryable {
			return nil, fmt.Errorf("%w: endpoint %s: %v", ErrEndpoint, s.cfg.EndpointName, err)
		}
		last = err
		s.cfg.Logger.Debug("sagemaker: retrying", "endpoint", s.cfg.EndpointName, "error", err.Error(), "retry_after", wait)
		return nil, client.Retryable(err, wait)
	})
	if err == nil {
		return out, nil
	}
	if errors.Is(err, client.ErrGaveUp) {
		return nil, fmt.Errorf("%w: endpoint %s: gave up after %d attempts: %v", engine.ErrUnavailable, s.cfg.EndpointName, attempts, last)
	}
	return nil, err
}

// classify reports whether an InvokeEndpoint error may pass, and the wait
// the endpoint asked for (Retry-After), if any.
func classify(err error) (bool, time.Duration) {
	var se *smithyhttp.RequestSendError
	if errors.As(err, &se) {
		return true, 0 // connection refused, reset, DNS…
	}
	var re *smithyhttp.ResponseError
	if errors.As(err, &re) && re.Response != nil && re.Response.StatusCode != 0 {
		status := re.HTTPStatusCode()
		wait := client.ParseRetryAfter(re.Response.Header.Get("Retry-After"))
		var me *types.ModelError
		if errors.As(err, &me) && me.OriginalStatusCode != nil {
			// The container itself shed load (e.g. verdict serve's full
			// admission queue behind a real endpoint).
			oc := int(*me.OriginalStatusCode)
			return oc == http.StatusTooManyRequests || oc == http.StatusServiceUnavailable, wait
		}
		return status == http.StatusTooManyRequests || status >= 500, wait
	}
	if errors.Is(err, context.DeadlineExceeded) {
		return true, 0 // the attempt timed out; the caller's context is alive
	}
	var te *types.ServiceUnavailable
	return errors.As(err, &te), 0
}

var _ engine.Scorer = (*Scorer)(nil)

// compile-time check that the SDK client fits InvokeAPI.
var _ InvokeAPI = (*sagemakerruntime.Client)(nil)

// bodyPreview is used in error messages about bad responses.
func bodyPreview(b []byte) string {
	b = bytes.TrimSpace(b)
	if len(b) > 200 {
		return string(b[:200]) + "…"
	}
	return string(b)
}
