package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"path/filepath"
	"sort"
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/sagemakerruntime"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/engine"
	"github.com/verdict-dev/verdict/engine/sagemaker"
	"github.com/verdict-dev/verdict/internal/listen"
	"github.com/verdict-dev/verdict/internal/queue"
	"github.com/verdict-dev/verdict/internal/results"
	"github.com/verdict-dev/verdict/internal/sink"
	"github.com/verdict-dev/verdict/internal/tune"
	"github.com/verdict-dev/verdict/policy"
	"github.com/verdict-dev/verdict/worker"
)

func init() {
	register(command{name: "worker", summary: "consume decisions from SQS or the local queue, score, apply policy, publish", runFunc: runWorker})
}

// workerFlags are the flags of `verdict worker`.
type workerFlags struct {
	queueKind       string
	queueURL        string
	queueName       string
	data            string
	endpoint        string
	region          string
	maxReceives     int
	resultsQueueURL string
	snsTopicARN     string
	resultsStore    string
	resultsTable    string
	resultsTTL      time.Duration
	webhookURL      string
	webhookSecret   string
	webhookHosts    string
	webhookPrivate  bool
	policyFile      string
	concurrency     int
	maxMessages     int
	visibility      time.Duration
	wait            time.Duration
	shutdown        time.Duration
	retryBase       time.Duration
	retryMax        time.Duration
	metricsAddr     string
	logState        bool
	publishTiming   bool
	pool            string
	escalate        string
	sm              sageMakerFlags
}

// sageMakerFlags choose the scoring engine of `verdict worker`: the local
// llama.cpp model or a SageMaker real-time endpoint.
type sageMakerFlags struct {
	engine         string
	endpoint       string
	url            string
	maxAttempts    int
	maxElapsed     time.Duration
	attemptTimeout time.Duration
	maxBatch       int
	concurrency    int
}

// Engine kinds of --engine.
const (
	engineLlamaCpp  = "llamacpp"
	engineSageMaker = "sagemaker"
)

// sageMakerDefaults are the endpoint client's settings when no flag gives
// them: the worker's flag defaults, and verdict up's for its gpu pool.
var sageMakerDefaults = sageMakerFlags{maxAttempts: 5, maxElapsed: 30 * time.Second, attemptTimeout: 60 * time.Second, maxBatch: 64, concurrency: 4}

func (f *sageMakerFlags) register(fs *flag.FlagSet) {
	d := sageMakerDefaults
	fs.StringVar(&f.engine, "engine", engineLlamaCpp, "scoring engine: llamacpp (load the model in-process) or sagemaker (send decisions to a SageMaker endpoint; no model is loaded)")
	fs.StringVar(&f.endpoint, "sagemaker-endpoint", "", "SageMaker endpoint `name` (required with --engine sagemaker)")
	fs.StringVar(&f.url, "sagemaker-url", "", "SageMaker runtime `URL` override, e.g. a local verdict serve at http://127.0.0.1:8080 (default: the region's endpoint)")
	fs.IntVar(&f.maxAttempts, "sagemaker-max-attempts", d.maxAttempts, "attempts per endpoint request, the first included (503, 429, 5xx and connection errors are retried)")
	fs.DurationVar(&f.maxElapsed, "sagemaker-max-elapsed", d.maxElapsed, "longest time one endpoint request may spend retrying; then the message is released for later")
	fs.DurationVar(&f.attemptTimeout, "sagemaker-attempt-timeout", d.attemptTimeout, "limit of one endpoint attempt; a slower one is retried")
	fs.IntVar(&f.maxBatch, "sagemaker-max-batch", d.maxBatch, "most decisions per endpoint request (decisions sharing a state go together)")
	fs.IntVar(&f.concurrency, "sagemaker-concurrency", d.concurrency, "endpoint requests in flight per scored batch")
}

// check validates the engine flags, naming the flag. set holds the flags
// given on the command line or through VERDICT_* variables.
func (f *sageMakerFlags) check(set map[string]bool) error {
	switch f.engine {
	case engineLlamaCpp:
		for _, name := range []string{"sagemaker-endpoint", "sagemaker-url", "sagemaker-max-attempts", "sagemaker-max-elapsed", "sagemaker-attempt-timeout", "sagemaker-max-batch", "sagemaker-concurrency"} {
			if set[name] {
				return fmt.Errorf("flag --%s: only used with --engine sagemaker (the engine is %s)", name, f.engine)
			}
		}
		return nil
	case engineSageMaker:
	default:
		return fmt.Errorf("flag --engine: bad value %q (want llamacpp or sagemaker)", f.engine)
	}
	switch {
	case strings.TrimSpace(f.endpoint) == "":
		return errors.New("flag --sagemaker-endpoint: required with --engine sagemaker")
	case f.url != "" && !strings.HasPrefix(f.url, "http://") && !strings.HasPrefix(f.url, "https://"):
		return fmt.Errorf("flag --sagemaker-url: must be an http(s) URL, got %q", f.url)
	case f.maxAttempts < 1:
		return fmt.Errorf("flag --sagemaker-max-attempts: must be >= 1, got %d", f.maxAttempts)
	case f.maxElapsed <= 0:
		return fmt.Errorf("flag --sagemaker-max-elapsed: must be > 0, got %v", f.maxElapsed)
	case f.attemptTimeout <= 0:
		return fmt.Errorf("flag --sagemaker-attempt-timeout: must be > 0, got %v", f.attemptTimeout)
	case f.maxBatch < 1:
		return fmt.Errorf("flag --sagemaker-max-batch: must be >= 1, got %d", f.maxBatch)
	case f.concurrency < 1:
		return fmt.Errorf("flag --sagemaker-concurrency: must be >= 1, got %d", f.concurrency)
	}
	return nil
}

// open builds the SageMaker scorer. The client uses the worker's AWS
// configuration (--region, else the environment's, else us-east-1) with
// the SDK's own retries off: the scorer retries, and the two would multiply.
func (f *sageMakerFlags) open(ctx context.Context, region string) (*sagemaker.Scorer, error) {
	awsCfg, err := queue.LoadAWS(ctx, region)
	if err != nil {
		return nil, fmt.Errorf("flag --region: %w", err)
	}
	awsCfg.Retryer = func() aws.Retryer { return aws.NopRetryer{} }
	client := sagemakerruntime.NewFromConfig(awsCfg, func(o *sagemakerruntime.Options) {
		if f.url != "" {
			o.BaseEndpoint = aws.String(f.url)
		}
		o.Retryer = aws.NopRetryer{}
		o.RetryMaxAttempts = 1
	})
	s, err := sagemaker.New(ctx, sagemaker.Config{
		EndpointName: f.endpoint, Client: client,
		MaxAttempts: f.maxAttempts, MaxElapsed: f.maxElapsed, AttemptTimeout: f.attemptTimeout,
		MaxBatch: f.maxBatch, Concurrency: f.concurrency, Logger: slog.Default(),
	})
	if err != nil {
		return nil, fmt.Errorf("flag --sagemaker-endpoint: %w", err)
	}
	return s, nil
}

func (f *workerFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.queueKind, "queue", "local", "queue to consume: local (embedded SQLite queue) or sqs")
	fs.StringVar(&f.queueURL, "queue-url", "", "SQS queue URL (with --queue sqs; a URL ending in .fifo is a FIFO queue)")
	fs.StringVar(&f.queueName, "queue-name", "cpu", "local queue name within the data directory's queue file (with --queue local)")
	fs.StringVar(&f.data, "data", ".verdict", "directory of the local queue (queue.db) and the default results store (results.db)")
	fs.StringVar(&f.endpoint, "sqs-endpoint", "", "endpoint URL for SQS and SNS (e.g. moto or LocalStack; default: AWS_ENDPOINT_URL_SQS, AWS_ENDPOINT_URL, else AWS)")
	fs.StringVar(&f.region, "region", "", "AWS region (default: from the AWS configuration, else us-east-1)")
	fs.IntVar(&f.maxReceives, "max-receives", 5, "local queue: receives before a message goes to the dead-letter table (SQS: set the redrive policy)")
	fs.StringVar(&f.resultsQueueURL, "results-queue-url", "", "publish one message per result to this SQS queue")
	fs.StringVar(&f.snsTopicARN, "sns-topic-arn", "", "publish one notification per result to this SNS topic")
	fs.StringVar(&f.resultsTable, "results-table", "", "DynamoDB results table (deploy/cloudformation.json's ResultsTable): each result is written there before its message is deleted, and the front door answers GET /v1/requests/{id} from it")
	fs.DurationVar(&f.resultsTTL, "results-ttl", results.DefaultTTL, "with --results-table: how long results live in the table")
	fs.StringVar(&f.resultsStore, "results-store", "", "SQLite results store file (default with --queue local: DATA/results.db; \"none\" disables)")
	fs.StringVar(&f.webhookURL, "webhook-url", "", "POST every result to this URL (requests may also name their own reply URLs)")
	fs.StringVar(&f.webhookSecret, "webhook-secret", "", "HMAC-SHA256 key for webhook signatures (required for webhooks)")
	fs.StringVar(&f.webhookHosts, "webhook-allow-hosts", "", "comma-separated hosts webhooks may go to (.example.com allows subdomains; default any)")
	fs.BoolVar(&f.webhookPrivate, "webhook-allow-private", false, "allow webhooks to private networks (10/8, 172.16/12, 192.168/16, fc00::/7, 100.64/10), loopback and link-local; cloud metadata addresses stay refused")
	fs.StringVar(&f.policyFile, "policy", "", "policy file (default: the permissive default policy); reloaded on SIGHUP")
	fs.IntVar(&f.concurrency, "concurrency", worker.DefaultConcurrency, "received batches processed at once")
	fs.IntVar(&f.maxMessages, "max-messages", queue.MaxBatch, "most messages per receive, 1..10")
	fs.DurationVar(&f.visibility, "visibility", worker.DefaultVisibility, "visibility timeout; extended every third of it while a message is processed")
	fs.DurationVar(&f.wait, "wait", worker.DefaultWait, "long-poll time of a receive, at most 20s; 0: return at once")
	fs.DurationVar(&f.shutdown, "shutdown-timeout", worker.DefaultShutdownTimeout, "on SIGTERM/SIGINT, time to finish in-flight work and release the rest; 0: release at once")
	fs.DurationVar(&f.retryBase, "retry-base", worker.DefaultRetryBase, "release delay after a failed first receive; doubles per receive; 0: release at once")
	fs.DurationVar(&f.retryMax, "retry-max", worker.DefaultRetryMax, "longest release delay; 0: release at once")
	fs.StringVar(&f.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics (default: off)")
	fs.BoolVar(&f.logState, "log-state", false, "let debug logs include state text (off: logs never contain state text)")
	fs.BoolVar(&f.publishTiming, "publish-timing", false, "include per-run timing in published results (then redeliveries differ in those bytes)")
	fs.StringVar(&f.pool, "pool", "", "the pool this worker serves, cpu or gpu: its stage in a cascade (default: the --queue-name of a local queue when it is cpu or gpu, else the pool each message was sent to)")
	fs.StringVar(&f.escalate, "escalate", "", "where decisions a policy escalates go: POOL=QUEUE[,POOL=QUEUE], QUEUE an SQS queue URL with --queue sqs or a local queue name with --queue local, e.g. gpu=https://sqs.us-east-1.amazonaws.com/123/verdict-gpu (needs --pool)")
	f.sm.register(fs)
}

// resources collects what must be closed when a command ends, closed in
// the reverse order of add. The pointer receiver of close matters: `defer
// res.close()` then closes what was added after the defer statement.
type resources []func()

func (r *resources) add(f func()) { *r = append(*r, f) }
func (r *resources) close() {
	for i := len(*r) - 1; i >= 0; i-- {
		(*r)[i]()
	}
	*r = nil
}

// build turns the flags into a worker configuration (without the scorer).
func (f *workerFlags) build(ctx context.Context, res *resources) (worker.Config, error) {
	var cfg worker.Config
	var awsCfg *queueAWS
	loadAWS := func() (*queueAWS, error) {
		if awsCfg == nil {
			c, err := queue.LoadAWS(ctx, f.region)
			if err != nil {
				return nil, fmt.Errorf("flag --region: %w", err)
			}
			awsCfg = &queueAWS{cfg: c}
		}
		return awsCfg, nil
	}
	switch f.queueKind {
	case "local":
		if err := os.MkdirAll(f.data, 0o755); err != nil {
			return cfg, fmt.Errorf("flag --data: %w", err)
		}
		if f.maxReceives < 1 {
			return cfg, fmt.Errorf("flag --max-receives: must be >= 1, got %d", f.maxReceives)
		}
		q, err := f.openLocal(f.queueName)
		if err != nil {
			return cfg, fmt.Errorf("flag --data: %w", err)
		}
		res.add(func() { q.Close() })
		cfg.Queue = q
		if f.resultsStore == "" {
			f.resultsStore = filepath.Join(f.data, "results.db")
		}
	case "sqs":
		if f.queueURL == "" {
			return cfg, errors.New("flag --queue-url: required with --queue sqs")
		}
		a, err := loadAWS()
		if err != nil {
			return cfg, err
		}
		q, err := queue.NewSQS(ctx, queue.SQSConfig{URL: f.queueURL, Endpoint: f.endpoint, AWS: &a.cfg})
		if err != nil {
			return cfg, fmt.Errorf("flag --queue-url: %w", err)
		}
		cfg.Queue = q
	default:
		return cfg, fmt.Errorf("flag --queue: bad value %q (want local or sqs)", f.queueKind)
	}
	pool, escalate, err := f.cascade(ctx, loadAWS, res)
	if err != nil {
		return cfg, err
	}
	cfg.Pool, cfg.Escalate = pool, escalate
	if f.resultsQueueURL != "" {
		a, err := loadAWS()
		if err != nil {
			return cfg, err
		}
		s, err := sink.NewSQS(queue.NewSQSClient(a.cfg, f.endpoint), f.resultsQueueURL)
		if err != nil {
			return cfg, fmt.Errorf("flag --results-queue-url: %w", err)
		}
		cfg.Sinks = append(cfg.Sinks, s)
	}
	if f.snsTopicARN != "" {
		a, err := loadAWS()
		if err != nil {
			return cfg, err
		}
		s, err := sink.NewSNS(sink.NewSNSClient(a.cfg, f.endpoint), f.snsTopicARN)
		if err != nil {
			return cfg, fmt.Errorf("flag --sns-topic-arn: %w", err)
		}
		cfg.Sinks = append(cfg.Sinks, s)
	}
	if f.resultsTable != "" {
		a, err := loadAWS()
		if err != nil {
			return cfg, err
		}
		if f.resultsTTL <= 0 {
			return cfg, fmt.Errorf("flag --results-ttl: must be > 0, got %v", f.resultsTTL)
		}
		st, err := results.NewDynamo(results.DynamoConfig{Table: f.resultsTable, Client: dynamodb.NewFromConfig(a.cfg), TTL: f.resultsTTL})
		if err != nil {
			return cfg, fmt.Errorf("flag --results-table: %w", err)
		}
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		err = st.Check(cctx)
		cancel()
		if err != nil {
			return cfg, fmt.Errorf("flag --results-table: %w", err)
		}
		cfg.Sinks = append(cfg.Sinks, st)
	}
	if f.resultsStore != "" && f.resultsStore != "none" {
		st, err := results.OpenFile(f.resultsStore)
		if err != nil {
			return cfg, fmt.Errorf("flag --results-store: %w", err)
		}
		res.add(func() { st.Close() })
		cfg.Sinks = append(cfg.Sinks, st)
	}
	if f.webhookURL != "" || f.webhookSecret != "" {
		if f.webhookSecret == "" {
			return cfg, errors.New("flag --webhook-secret: required for webhooks")
		}
		var hosts []string
		for _, h := range strings.Split(f.webhookHosts, ",") {
			if h = strings.TrimSpace(h); h != "" {
				hosts = append(hosts, h)
			}
		}
		wh, err := sink.NewWebhook(sink.WebhookConfig{URL: f.webhookURL, Secret: []byte(f.webhookSecret), AllowHosts: hosts, AllowPrivate: f.webhookPrivate})
		if err != nil {
			return cfg, fmt.Errorf("flag --webhook-url/--webhook-allow-hosts: %w", err)
		}
		res.add(wh.Close)
		cfg.Webhook = wh
		if f.webhookURL != "" {
			cfg.Sinks = append(cfg.Sinks, wh)
		}
	}
	if len(cfg.Sinks) == 0 {
		return cfg, errors.New("no result sink: set --results-table, --results-queue-url, --sns-topic-arn, --webhook-url or --results-store")
	}
	h, err := policy.NewHolder(f.policyFile)
	if err != nil {
		return cfg, fmt.Errorf("flag --policy: %w", err)
	}
	if pool != decision.RouteAuto {
		pools := []decision.Route{pool}
		for r := range escalate {
			pools = append(pools, r)
		}
		if err := h.RequirePools(pools, false); err != nil {
			return cfg, fmt.Errorf("flag --policy: %w (this worker serves pool %s and escalates to %s)", err, pool, escalateNames(escalate))
		}
	}
	cfg.Policy = h
	set := f.settings()
	cfg.Concurrency, cfg.MaxMessages = set.Concurrency, set.MaxMessages
	cfg.Visibility, cfg.Wait, cfg.ShutdownTimeout = set.Visibility, set.Wait, set.ShutdownTimeout
	cfg.RetryBase, cfg.RetryMax = set.RetryBase, set.RetryMax
	cfg.LogState, cfg.PublishTiming = f.logState, f.publishTiming
	return cfg, nil
}

type queueAWS struct{ cfg aws.Config }

// openLocal opens the local queue name in DATA/queue.db: the one the
// worker consumes, or one it sends escalated decisions to.
func (f *workerFlags) openLocal(name string) (*queue.Local, error) {
	return queue.OpenLocal(queue.LocalConfig{Path: filepath.Join(f.data, "queue.db"), Name: name, MaxReceives: f.maxReceives, Visibility: f.visibility})
}

// cascade reads --pool and --escalate: the worker's pool (from
// --queue-name for a local queue named cpu or gpu) and the queues of the
// pools it sends escalated decisions to.
func (f *workerFlags) cascade(ctx context.Context, loadAWS func() (*queueAWS, error), res *resources) (decision.Route, map[decision.Route]queue.Sender, error) {
	pool := decision.Route(f.pool)
	switch {
	case pool == decision.RouteAuto && f.queueKind == "local" && decision.Route(f.queueName).IsPool():
		pool = decision.Route(f.queueName)
	case pool != decision.RouteAuto && !pool.IsPool():
		return "", nil, fmt.Errorf("flag --pool: %q is not a pool (want cpu or gpu)", f.pool)
	}
	if strings.TrimSpace(f.escalate) == "" {
		return pool, nil, nil
	}
	if pool == decision.RouteAuto {
		return "", nil, errors.New("flag --escalate: needs --pool (the pool this worker serves)")
	}
	out := map[decision.Route]queue.Sender{}
	for _, part := range strings.Split(f.escalate, ",") {
		name, target, ok := strings.Cut(strings.TrimSpace(part), "=")
		to := decision.Route(strings.TrimSpace(name))
		target = strings.TrimSpace(target)
		switch {
		case !ok || target == "":
			return "", nil, fmt.Errorf("flag --escalate: %q is not POOL=QUEUE", part)
		case !to.IsPool():
			return "", nil, fmt.Errorf("flag --escalate: %q is not a pool (want cpu or gpu)", name)
		case to == pool:
			return "", nil, fmt.Errorf("flag --escalate: %s is this worker's own pool (--pool): a pool cannot escalate to itself", to)
		case out[to] != nil:
			return "", nil, fmt.Errorf("flag --escalate: pool %s is named twice", to)
		}
		switch f.queueKind {
		case "local":
			q, err := f.openLocal(target)
			if err != nil {
				return "", nil, fmt.Errorf("flag --escalate: %s: %w", to, err)
			}
			res.add(func() { q.Close() })
			out[to] = q
		case "sqs":
			if !strings.HasPrefix(target, "https://") && !strings.HasPrefix(target, "http://") {
				return "", nil, fmt.Errorf("flag --escalate: %s: %q is not an SQS queue URL", to, target)
			}
			a, err := loadAWS()
			if err != nil {
				return "", nil, err
			}
			q, err := queue.NewSQS(ctx, queue.SQSConfig{URL: target, Endpoint: f.endpoint, AWS: &a.cfg})
			if err != nil {
				return "", nil, fmt.Errorf("flag --escalate: %s: %w", to, err)
			}
			out[to] = q
		}
	}
	return pool, out, nil
}

// escalateNames lists the pools of an --escalate map, for messages.
func escalateNames(m map[decision.Route]queue.Sender) string {
	if len(m) == 0 {
		return "none"
	}
	var names []string
	for r := range m {
		names = append(names, string(r))
	}
	sort.Strings(names)
	return strings.Join(names, ",")
}

func runWorker(ctx context.Context, args []string) error {
	fs := newFlagSet("worker", "worker [flags]")
	var (
		wf workerFlags
		ef engineFlags
		lf logFlags
	)
	wf.register(fs)
	ef.register(fs)
	lf.register(fs)
	if err := startCommand(fs, args, &lf, func() error { return checkWorkerFlags(&wf) }); err != nil {
		return err
	}
	set := map[string]bool{}
	fs.VisitAll(func(fl *flag.Flag) {
		if _, ok := os.LookupEnv(envName(fl.Name)); ok {
			set[fl.Name] = true
		}
	})
	fs.Visit(func(fl *flag.Flag) { set[fl.Name] = true })
	if err := wf.sm.check(set); err != nil {
		return err
	}
	var res resources
	defer res.close()
	cfg, err := wf.build(ctx, &res)
	if err != nil {
		return err
	}
	scorer, prefixStats, closeEngine, err := openWorkerEngine(ctx, &wf, &ef, set)
	if err != nil {
		return err
	}
	defer closeEngine()
	cfg.Scorer = scorer
	cfg.PrefixStatsFunc = prefixStats
	cfg.Logger = slog.Default()
	w, err := worker.New(cfg)
	if err != nil {
		return err
	}
	go cfg.Policy.WatchSIGHUP(ctx, func(err error) { slog.Error("policy reload failed; keeping the previous policy", "err", err) })

	if wf.metricsAddr != "" {
		ln, err := net.Listen("tcp", wf.metricsAddr)
		if err != nil {
			return fmt.Errorf("flag --metrics-addr: %w", err)
		}
		mux := http.NewServeMux()
		mux.Handle("/metrics", w.Handler())
		srv, err := listen.New(mux, listen.Config{Logger: slog.Default()})
		if err != nil {
			_ = ln.Close()
			return err
		}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
		slog.Info("metrics", "addr", ln.Addr().String())
	}

	defer releaseOnSecondSignal(w)()
	return w.Run(ctx)
}

// releaseOnSecondSignal watches SIGTERM/SIGINT while a worker runs. The
// first signal cancels the command's context (main does that), and Run
// stops gracefully within --shutdown-timeout; a second one releases what
// is left at once. It returns the function that stops watching.
func releaseOnSecondSignal(w *worker.Worker) func() {
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	done := make(chan struct{})
	go func() {
		n := 0
		for {
			select {
			case <-sigs:
				if n++; n >= 2 {
					slog.Warn("second signal: releasing unfinished messages now")
					now, cancel := context.WithCancel(context.Background())
					cancel()
					_ = w.Stop(now)
					return
				}
			case <-w.Closed():
				return
			case <-done:
				return
			}
		}
	}()
	return func() {
		signal.Stop(sigs)
		close(done)
	}
}

// openWorkerEngine opens the engine --engine names: the local llama.cpp
// model, or the SageMaker scorer (then no model is loaded and the model
// flags are ignored). It returns the prefix-cache statistics function (nil
// for SageMaker) and what closes the engine.
func openWorkerEngine(ctx context.Context, wf *workerFlags, ef *engineFlags, set map[string]bool) (engine.Scorer, func() (int64, int64), func(), error) {
	if wf.sm.engine == engineSageMaker {
		for _, name := range []string{"model", "m", "model-sha256"} {
			if set[name] {
				slog.Warn("--engine sagemaker loads no model; ignoring the model flag", "flag", "--"+name)
			}
		}
		s, err := wf.sm.open(ctx, wf.region)
		if err != nil {
			return nil, nil, nil, err
		}
		slog.Info("scoring on a SageMaker endpoint", "endpoint", wf.sm.endpoint, "url", wf.sm.url)
		cfg, err := ef.tuneConfig("", "") // the remote model's identity: checked on every result
		if err != nil {
			return nil, nil, nil, err
		}
		return tune.New(s, cfg), nil, func() {}, nil
	}
	eng, err := ef.open(sageMakerModelDir)
	if err != nil {
		return nil, nil, nil, err
	}
	sc, err := ef.tuned(eng)
	if err != nil {
		eng.Close()
		return nil, nil, nil, err
	}
	stats := func() (int64, int64) { s := eng.Stats(); return s.PrefixHits, s.PrefixMisses }
	return sc, stats, func() { eng.Close() }, nil
}

// workerFlagNames maps the worker.Config fields that flags set to the
// flags' names, for the errors of worker.Config.CheckSettings.
var workerFlagNames = map[string]string{
	"Concurrency": "concurrency", "MaxMessages": "max-messages", "Visibility": "visibility", "Wait": "wait",
	"ShutdownTimeout": "shutdown-timeout", "RetryBase": "retry-base", "RetryMax": "retry-max",
}

// noneIfZero turns a duration flag's 0 into worker.None: a flag has its
// default already, so its 0 means no time at all (no long poll, no
// graceful wait, no release delay).
func noneIfZero(d time.Duration) time.Duration {
	if d == 0 {
		return worker.None
	}
	return d
}

// settings are the worker.Config fields the numeric flags set.
func (f *workerFlags) settings() worker.Config {
	return worker.Config{
		Concurrency: f.concurrency, MaxMessages: f.maxMessages, Visibility: f.visibility,
		Wait: noneIfZero(f.wait), ShutdownTimeout: noneIfZero(f.shutdown),
		RetryBase: noneIfZero(f.retryBase), RetryMax: noneIfZero(f.retryMax),
	}
}

// checkWorkerFlags validates the numeric flags, naming the flag. What a
// flag's zero or sign cannot mean is refused here; the ranges are the
// worker's own (worker.Config.CheckSettings).
func checkWorkerFlags(f *workerFlags) error {
	for name, v := range map[string]int{"concurrency": f.concurrency, "max-messages": f.maxMessages} {
		if v < 1 {
			return fmt.Errorf("flag --%s: must be >= 1, got %d", name, v)
		}
	}
	for name, v := range map[string]time.Duration{"visibility": f.visibility, "wait": f.wait, "shutdown-timeout": f.shutdown,
		"retry-base": f.retryBase, "retry-max": f.retryMax} {
		if v < 0 {
			return fmt.Errorf("flag --%s: must be >= 0 (0: none), got %v", name, v)
		}
	}
	if f.visibility == 0 {
		return fmt.Errorf("flag --visibility: must be 1s..12h, got %v", f.visibility)
	}
	return flagError(f.settings().CheckSettings(), workerFlagNames)
}

// fieldProblem is a settings error that names the field at fault
// (worker.FieldError, llamacpp.OptionError).
type fieldProblem interface {
	FieldProblem() (field, problem string)
}

// flagError names the flag that set the field a settings error is about,
// by flags (field → flag name); a field with no flag keeps its own name.
func flagError(err error, flags map[string]string) error {
	var fp fieldProblem
	if errors.As(err, &fp) {
		field, problem := fp.FieldProblem()
		if name, ok := flags[field]; ok {
			return fmt.Errorf("flag --%s: %s", name, problem)
		}
	}
	return err
}
