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
	"strings"
	"syscall"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"

	"github.com/verdict-dev/verdict/policy"
	"github.com/verdict-dev/verdict/queue"
	"github.com/verdict-dev/verdict/sink"
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
}

func (f *workerFlags) register(fs *flag.FlagSet) {
	fs.StringVar(&f.queueKind, "queue", "local", "queue to consume: local (embedded SQLite queue) or sqs")
	fs.StringVar(&f.queueURL, "queue-url", "", "SQS queue URL (with --queue sqs; a URL ending in .fifo is a FIFO queue)")
	fs.StringVar(&f.queueName, "queue-name", "cpu", "local queue name within the data directory's queue file (with --queue local)")
	fs.StringVar(&f.data, "data", ".verdict", "directory of the local queue (queue.db) and the default results store (results.db)")
	fs.StringVar(&f.endpoint, "sqs-endpoint", "", "endpoint URL for SQS and SNS (e.g. moto or LocalStack; default: AWS)")
	fs.StringVar(&f.region, "region", "", "AWS region (default: from the AWS configuration, else us-east-1)")
	fs.IntVar(&f.maxReceives, "max-receives", 5, "local queue: receives before a message goes to the dead-letter table (SQS: set the redrive policy)")
	fs.StringVar(&f.resultsQueueURL, "results-queue-url", "", "publish one message per result to this SQS queue")
	fs.StringVar(&f.snsTopicARN, "sns-topic-arn", "", "publish one notification per result to this SNS topic")
	fs.StringVar(&f.resultsStore, "results-store", "", "SQLite results store file (default with --queue local: DATA/results.db; \"none\" disables)")
	fs.StringVar(&f.webhookURL, "webhook-url", "", "POST every result to this URL (requests may also name their own reply URLs)")
	fs.StringVar(&f.webhookSecret, "webhook-secret", "", "HMAC-SHA256 key for webhook signatures (required for webhooks)")
	fs.StringVar(&f.webhookHosts, "webhook-allow-hosts", "", "comma-separated hosts webhooks may go to (.example.com allows subdomains; default any)")
	fs.BoolVar(&f.webhookPrivate, "webhook-allow-private", false, "allow webhooks to loopback, link-local and metadata addresses")
	fs.StringVar(&f.policyFile, "policy", "", "policy file (default: the permissive default policy); reloaded on SIGHUP")
	fs.IntVar(&f.concurrency, "concurrency", worker.DefaultConcurrency, "received batches processed at once")
	fs.IntVar(&f.maxMessages, "max-messages", queue.MaxBatch, "most messages per receive, 1..10")
	fs.DurationVar(&f.visibility, "visibility", worker.DefaultVisibility, "visibility timeout; extended every third of it while a message is processed")
	fs.DurationVar(&f.wait, "wait", worker.DefaultWait, "long-poll time of a receive, at most 20s")
	fs.DurationVar(&f.shutdown, "shutdown-timeout", worker.DefaultShutdownTimeout, "on SIGTERM/SIGINT, time to finish in-flight work before releasing it")
	fs.DurationVar(&f.retryBase, "retry-base", worker.DefaultRetryBase, "release delay after a failed first receive; doubles per receive")
	fs.DurationVar(&f.retryMax, "retry-max", worker.DefaultRetryMax, "longest release delay")
	fs.StringVar(&f.metricsAddr, "metrics-addr", "", "serve Prometheus metrics at http://ADDR/metrics (default: off)")
	fs.BoolVar(&f.logState, "log-state", false, "let debug logs include state text (off: logs never contain state text)")
	fs.BoolVar(&f.publishTiming, "publish-timing", false, "include per-run timing in published results (then redeliveries differ in those bytes)")
}

// resources collects what must be closed when the worker ends.
type resources []func()

func (r *resources) add(f func()) { *r = append(*r, f) }
func (r resources) close() {
	for i := len(r) - 1; i >= 0; i-- {
		r[i]()
	}
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
		q, err := queue.OpenLocal(queue.LocalConfig{Path: filepath.Join(f.data, "queue.db"), Name: f.queueName, MaxReceives: f.maxReceives, Visibility: f.visibility})
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
	if f.resultsStore != "" && f.resultsStore != "none" {
		st, err := sink.OpenStore(f.resultsStore)
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
		return cfg, errors.New("no result sink: set --results-queue-url, --sns-topic-arn, --webhook-url or --results-store")
	}
	h, err := policy.NewHolder(f.policyFile)
	if err != nil {
		return cfg, fmt.Errorf("flag --policy: %w", err)
	}
	cfg.Policy = h
	cfg.Concurrency, cfg.MaxMessages = f.concurrency, f.maxMessages
	cfg.Visibility, cfg.Wait, cfg.ShutdownTimeout = f.visibility, f.wait, f.shutdown
	cfg.RetryBase, cfg.RetryMax = f.retryBase, f.retryMax
	cfg.LogState, cfg.PublishTiming = f.logState, f.publishTiming
	return cfg, nil
}

type queueAWS struct{ cfg aws.Config }

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
	if err := parseFlags(fs, args); err != nil {
		return err
	}
	if err := lf.setup(); err != nil {
		return err
	}
	if err := checkWorkerFlags(&wf); err != nil {
		return err
	}
	var res resources
	defer res.close()
	cfg, err := wf.build(ctx, &res)
	if err != nil {
		return err
	}
	eng, err := ef.open("/opt/ml/model")
	if err != nil {
		return err
	}
	defer eng.Close()
	cfg.Scorer = eng
	cfg.PrefixStatsFunc = func() (int64, int64) { s := eng.Stats(); return s.PrefixHits, s.PrefixMisses }
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
		srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
		go func() { _ = srv.Serve(ln) }()
		defer srv.Close()
		slog.Info("metrics", "addr", ln.Addr().String())
	}

	// The first SIGTERM/SIGINT cancels ctx: Run stops gracefully within
	// --shutdown-timeout. A second one releases what is left at once.
	sigs := make(chan os.Signal, 2)
	signal.Notify(sigs, os.Interrupt, syscall.SIGTERM)
	defer signal.Stop(sigs)
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
			}
		}
	}()
	return w.Run(ctx)
}

// checkWorkerFlags validates the numeric flags, naming the flag.
func checkWorkerFlags(f *workerFlags) error {
	switch {
	case f.concurrency < 1:
		return fmt.Errorf("flag --concurrency: must be >= 1, got %d", f.concurrency)
	case f.maxMessages < 1 || f.maxMessages > queue.MaxBatch:
		return fmt.Errorf("flag --max-messages: must be 1..10, got %d", f.maxMessages)
	case f.visibility < time.Second || f.visibility > queue.MaxVisibility:
		return fmt.Errorf("flag --visibility: must be 1s..12h, got %v", f.visibility)
	case f.wait < 0 || f.wait > queue.MaxWait:
		return fmt.Errorf("flag --wait: must be 0..20s, got %v", f.wait)
	case f.shutdown < 0:
		return fmt.Errorf("flag --shutdown-timeout: must be >= 0, got %v", f.shutdown)
	case f.retryMax < 0:
		return fmt.Errorf("flag --retry-max: must be >= 0, got %v", f.retryMax)
	}
	return nil
}
