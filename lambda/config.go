package lambda

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/auth"
	"github.com/verdict-dev/verdict/internal/queue"
	"github.com/verdict-dev/verdict/internal/results"
	"github.com/verdict-dev/verdict/internal/sink"
	"github.com/verdict-dev/verdict/router"
)

// Sentinel errors.
var (
	// ErrConfig: a Config or an environment variable is invalid.
	ErrConfig = errors.New("lambda: invalid configuration")
	// ErrForbidden: the policy refused the request (HTTP 403). Authorizers
	// wrap it with a reason the caller may read.
	ErrForbidden = errors.New("lambda: forbidden")
)

// Router chooses the queue for decisions that share one state.
// router.Config satisfies it.
type Router interface {
	Choose(ds []decision.Decision) decision.Route
}

// Caller is the authenticated client of a request.
type Caller struct {
	// Tenant is the tenant the API key maps to, or the authorizer identity.
	Tenant string
	// APIKey is the key the caller presented and that was checked ("" for
	// authorizer identities, anonymous callers, and when no keys are
	// configured, as a key is then not checked).
	APIKey string
	// Identity is the authorizer identity from the request context (an IAM
	// ARN, a JWT subject), when there was one.
	Identity string
	// Review is true for an API key granted the review inbox
	// (KEY=TENANT:review): it may read the states of decisions sent to
	// review.
	Review bool
}

// Default values of Config.
const (
	DefaultMaxBodyBytes = 1 << 20
	DefaultRetryAfter   = 2 * time.Second
	DefaultSendTimeout  = 10 * time.Second
)

// Config configures a Handler.
type Config struct {
	// Queues maps a route to the queue that serves it. At least one is
	// required; a route chosen by Router without a queue falls back to
	// the other queue. No default.
	Queues map[decision.Route]queue.Sender
	// Router picks each message's route. Defaults to the cpu queue when
	// only that one is configured, else required.
	Router Router
	// GroupKeyFunc is the grouping key of a state. Defaults to
	// router.GroupKey.
	GroupKeyFunc func(decision.State) string
	// AuthorizeFunc is the policy's authorization check, run for every
	// decision before anything is enqueued. It returns an error wrapping
	// ErrForbidden to refuse (HTTP 403; the message is shown to the
	// caller); any other error is an internal failure (HTTP 500). It may
	// change the decision (remove options the caller may not receive).
	// Defaults to allowing everything.
	AuthorizeFunc func(ctx context.Context, c Caller, d *decision.Decision) error
	// Results, when set, is the results store: every accepted request is
	// recorded there once all its messages are enqueued (a request
	// answered with an error never is; a failed record is logged and the
	// answer stays 202, the work being queued), and GET
	// /v1/requests/{id} and GET /v1/decisions/{id} answer from it. The
	// 202's results links then point there unless ResultsLocation and
	// DecisionLocation say otherwise. Defaults to none: those paths are
	// 404 and results are read where the workers publish them.
	Results results.Store
	// FeedbackSinks receive every answer POST /v1/decisions/{id}/feedback
	// records, as a sink.Event of kind "feedback" (the SQS queue, SNS
	// topic and webhook the workers publish results to). A failure is
	// logged; the answer stays stored. Defaults to none.
	FeedbackSinks []sink.EventSink
	// OnFeedback, when set, is told of every answer recorded (not of
	// replays), with the decision's record: verdict up feeds its live
	// quality metrics with it. It must not block. Defaults to none.
	OnFeedback func(stored results.Stored, label results.Feedback)
	// APIKeys maps an API key to its tenant ("" is allowed: the default
	// tenant). Defaults to none.
	APIKeys map[string]string
	// AllowAnonymous accepts requests without credentials (tenant "").
	// A wrong key is refused even so while APIKeys is set; with no APIKeys,
	// authentication is off and a presented key is not checked (package
	// auth). Defaults to false.
	AllowAnonymous bool
	// TrustAuthorizer accepts the identity API Gateway's authorizer (IAM,
	// JWT, Lambda authorizer) put in the request context instead of an API
	// key. Defaults to false; NewFromEnv turns it on unless
	// VERDICT_TRUST_AUTHORIZER=false.
	TrustAuthorizer bool
	// Limits bound what a request may hold. Defaults to decision's.
	Limits decision.Limits
	// MaxBodyBytes bounds the request body (HTTP 413 beyond). Defaults to
	// 1 MiB.
	MaxBodyBytes int
	// RetryAfter is the Retry-After answered with 503 when the queue
	// fails. Defaults to 2 s.
	RetryAfter time.Duration
	// SendTimeout bounds the enqueue of one request. Defaults to 10 s.
	SendTimeout time.Duration
	// ResultsLocation tells clients where results appear; "{request_id}"
	// is replaced by the request id (e.g. "/v1/requests/{request_id}" or
	// a results queue URL). Defaults to "/v1/requests/{request_id}" with
	// Results, else "" (omitted).
	ResultsLocation string
	// DecisionLocation is the same for one decision; "{request_id}" and
	// "{decision_id}" are replaced (URL path-escaped). Defaults to
	// "/v1/decisions/{decision_id}?request_id={request_id}" with Results,
	// else "" (omitted).
	DecisionLocation string
	// Logger receives one line per internal failure. Defaults to
	// slog.Default().
	Logger *slog.Logger
	// NowFunc is the clock. Defaults to time.Now.
	NowFunc func() time.Time
}

func (c *Config) validate() error {
	var errs []string
	if len(c.Queues) == 0 {
		errs = append(errs, "Queues: at least one queue is required")
	}
	for r, s := range c.Queues {
		if !r.IsPool() {
			errs = append(errs, fmt.Sprintf("Queues: route %q must be cpu or gpu", r))
		}
		if s == nil {
			errs = append(errs, fmt.Sprintf("Queues[%s]: nil sender", r))
		}
	}
	if c.Router == nil && len(c.Queues) > 1 {
		errs = append(errs, "Router: required when both queues are configured")
	}
	if c.MaxBodyBytes < 0 {
		errs = append(errs, fmt.Sprintf("MaxBodyBytes: %d must not be negative", c.MaxBodyBytes))
	}
	if c.RetryAfter < 0 {
		errs = append(errs, fmt.Sprintf("RetryAfter: %s must not be negative", c.RetryAfter))
	}
	if c.SendTimeout < 0 {
		errs = append(errs, fmt.Sprintf("SendTimeout: %s must not be negative", c.SendTimeout))
	}
	if _, err := auth.New(c.APIKeys, c.AllowAnonymous); err != nil {
		errs = append(errs, "APIKeys: "+auth.Message(err))
	}
	if len(errs) > 0 {
		return fmt.Errorf("%w: %s", ErrConfig, strings.Join(errs, "; "))
	}
	return nil
}

func (c *Config) withDefaults() {
	if c.MaxBodyBytes == 0 {
		c.MaxBodyBytes = DefaultMaxBodyBytes
	}
	if c.RetryAfter == 0 {
		c.RetryAfter = DefaultRetryAfter
	}
	if c.SendTimeout == 0 {
		c.SendTimeout = DefaultSendTimeout
	}
	if c.GroupKeyFunc == nil {
		c.GroupKeyFunc = router.GroupKey
	}
	if c.Logger == nil {
		c.Logger = slog.Default()
	}
	if c.NowFunc == nil {
		c.NowFunc = time.Now
	}
	if c.Results != nil && c.ResultsLocation == "" {
		c.ResultsLocation = PathRequests + "{request_id}"
	}
	if c.Results != nil && c.DecisionLocation == "" {
		c.DecisionLocation = PathDecisions + "/{decision_id}?request_id={request_id}"
	}
}

// Env is the front door's configuration from VERDICT_* environment
// variables (the Lambda has no command line).
type Env struct {
	// CPUQueueURL is VERDICT_CPU_QUEUE_URL: the SQS queue of the cpu pool.
	CPUQueueURL string
	// GPUQueueURL is VERDICT_GPU_QUEUE_URL: the SQS queue of the gpu pool.
	GPUQueueURL string
	// SQSEndpoint is VERDICT_SQS_ENDPOINT: an SQS endpoint override (for
	// moto or LocalStack). Defaults to the AWS endpoint of the region.
	SQSEndpoint string
	// GPUTokenThreshold is VERDICT_GPU_TOKEN_THRESHOLD: the router's
	// estimated token count from which work goes to the gpu pool.
	// Defaults to 0 (the router's default).
	GPUTokenThreshold int
	// APIKeys is VERDICT_API_KEYS: "KEY=TENANT,KEY" (as `verdict serve
	// --api-keys`). Defaults to none.
	APIKeys map[string]string
	// AllowAnonymous is VERDICT_ALLOW_ANONYMOUS. Defaults to false.
	AllowAnonymous bool
	// TrustAuthorizer is VERDICT_TRUST_AUTHORIZER. Defaults to true.
	TrustAuthorizer bool
	// PolicyFile is VERDICT_POLICY: the policy file. Defaults to none.
	PolicyFile string
	// MaxBodyBytes is VERDICT_MAX_BODY_BYTES. Defaults to 1 MiB.
	MaxBodyBytes int
	// RetryAfter is VERDICT_RETRY_AFTER (a Go duration). Defaults to 2s.
	RetryAfter time.Duration
	// ResultsLocation is VERDICT_RESULTS_LOCATION (see
	// Config.ResultsLocation). Defaults to "".
	ResultsLocation string
	// ResultsTable is VERDICT_RESULTS_TABLE: the DynamoDB results table
	// the workers write (verdict worker --results-table). With it the
	// front door records accepted requests there and answers GET
	// /v1/requests/{id} and GET /v1/decisions/{id}. Defaults to none.
	ResultsTable string
	// ResultsTTL is VERDICT_RESULTS_TTL (a Go duration): how long
	// recorded requests live in the table. Defaults to 7 days.
	ResultsTTL time.Duration
	// ResultsQueueURL, SNSTopicARN, WebhookURL and WebhookSecret are
	// VERDICT_RESULTS_QUEUE_URL, VERDICT_SNS_TOPIC_ARN,
	// VERDICT_WEBHOOK_URL and VERDICT_WEBHOOK_SECRET, the variables the
	// workers read for their sinks: feedback answers are published there
	// too. Default to none.
	ResultsQueueURL, SNSTopicARN, WebhookURL, WebhookSecret string
}

// LoadEnv reads the front door's environment through lookup (os.LookupEnv
// in production). Every problem is reported, each naming its variable.
func LoadEnv(lookup func(string) (string, bool)) (Env, error) {
	e := Env{TrustAuthorizer: true}
	var errs []string
	get := func(name string) string {
		v, _ := lookup(name)
		return strings.TrimSpace(v)
	}
	e.CPUQueueURL = get("VERDICT_CPU_QUEUE_URL")
	e.GPUQueueURL = get("VERDICT_GPU_QUEUE_URL")
	e.SQSEndpoint = get("VERDICT_SQS_ENDPOINT")
	e.PolicyFile = get("VERDICT_POLICY")
	e.ResultsLocation = get("VERDICT_RESULTS_LOCATION")
	e.ResultsTable = get("VERDICT_RESULTS_TABLE")
	e.ResultsQueueURL = get("VERDICT_RESULTS_QUEUE_URL")
	e.SNSTopicARN = get("VERDICT_SNS_TOPIC_ARN")
	e.WebhookURL = get("VERDICT_WEBHOOK_URL")
	e.WebhookSecret, _ = lookup("VERDICT_WEBHOOK_SECRET")
	if e.WebhookURL != "" && e.WebhookSecret == "" {
		errs = append(errs, "VERDICT_WEBHOOK_SECRET: required with VERDICT_WEBHOOK_URL (webhooks are signed)")
	}
	if e.CPUQueueURL == "" && e.GPUQueueURL == "" {
		errs = append(errs, "VERDICT_CPU_QUEUE_URL: at least one of VERDICT_CPU_QUEUE_URL and VERDICT_GPU_QUEUE_URL is required")
	}
	for _, u := range []struct{ name, v string }{{"VERDICT_CPU_QUEUE_URL", e.CPUQueueURL}, {"VERDICT_GPU_QUEUE_URL", e.GPUQueueURL}, {"VERDICT_SQS_ENDPOINT", e.SQSEndpoint},
		{"VERDICT_RESULTS_QUEUE_URL", e.ResultsQueueURL}, {"VERDICT_WEBHOOK_URL", e.WebhookURL}} {
		if u.v != "" && !strings.HasPrefix(u.v, "https://") && !strings.HasPrefix(u.v, "http://") {
			errs = append(errs, fmt.Sprintf("%s: %q is not an http(s) URL", u.name, u.v))
		}
	}
	intVar := func(name string, dst *int) {
		if v := get(name); v != "" {
			n, err := strconv.Atoi(v)
			if err != nil || n < 0 {
				errs = append(errs, fmt.Sprintf("%s: %q is not a non-negative integer", name, v))
				return
			}
			*dst = n
		}
	}
	boolVar := func(name string, dst *bool) {
		if v := get(name); v != "" {
			b, err := strconv.ParseBool(v)
			if err != nil {
				errs = append(errs, fmt.Sprintf("%s: %q is not a boolean", name, v))
				return
			}
			*dst = b
		}
	}
	intVar("VERDICT_GPU_TOKEN_THRESHOLD", &e.GPUTokenThreshold)
	intVar("VERDICT_MAX_BODY_BYTES", &e.MaxBodyBytes)
	boolVar("VERDICT_ALLOW_ANONYMOUS", &e.AllowAnonymous)
	boolVar("VERDICT_TRUST_AUTHORIZER", &e.TrustAuthorizer)
	if v := get("VERDICT_RETRY_AFTER"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d < 0 {
			errs = append(errs, fmt.Sprintf("VERDICT_RETRY_AFTER: %q is not a duration like 2s", v))
		}
		e.RetryAfter = d
	}
	if v := get("VERDICT_RESULTS_TTL"); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			errs = append(errs, fmt.Sprintf("VERDICT_RESULTS_TTL: %q is not a positive duration like 168h", v))
		}
		e.ResultsTTL = d
	}
	keys, err := auth.ParseKeys(get("VERDICT_API_KEYS"))
	if err != nil {
		errs = append(errs, "VERDICT_API_KEYS: "+err.Error())
	}
	e.APIKeys = keys
	if len(errs) > 0 {
		return e, fmt.Errorf("%w: %s", ErrConfig, strings.Join(errs, "; "))
	}
	return e, nil
}
