package worker

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

type metrics struct {
	received      prometheus.Counter
	deleted       prometheus.Counter
	released      *prometheus.CounterVec
	invalid       prometheus.Counter
	decisions     *prometheus.CounterVec
	published     *prometheus.CounterVec
	publishErrors *prometheus.CounterVec
	inFlight      prometheus.Gauge
	scoreSeconds  prometheus.Histogram
	batchSeconds  prometheus.Histogram
	panics        prometheus.Counter
	heartbeats    prometheus.Counter
	replyIgnored  prometheus.Counter
	receiveErrors prometheus.Counter
	escalated     *prometheus.CounterVec
}

func newMetrics(cfg Config) *metrics {
	const ns, sub = "verdict", "worker"
	m := &metrics{
		received: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "messages_received_total", Help: "Queue messages received."}),
		deleted: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "messages_deleted_total", Help: "Queue messages deleted after their results were published."}),
		released: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "messages_released_total", Help: "Queue messages given back to the queue, by reason."}, []string{"reason"}),
		invalid: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "messages_invalid_total", Help: "Messages that were not valid envelopes (answered with error results)."}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "decisions_total", Help: "Decisions settled, by outcome status."}, []string{"status"}),
		published: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "published_total", Help: "Result records published, by sink."}, []string{"sink"}),
		publishErrors: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "publish_errors_total", Help: "Failed publish calls, by sink and kind (transient or permanent)."}, []string{"sink", "kind"}),
		inFlight: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: ns, Subsystem: sub,
			Name: "messages_in_flight", Help: "Messages held by this worker now."}),
		scoreSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub,
			Name: "score_seconds", Help: "Latency of one engine call (one state group).",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16)}),
		batchSeconds: prometheus.NewHistogram(prometheus.HistogramOpts{Namespace: ns, Subsystem: sub,
			Name: "batch_seconds", Help: "Time from receive to the last queue action of a batch.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 18)}),
		panics: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "panics_total", Help: "Recovered panics."}),
		heartbeats: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "visibility_extensions_total", Help: "Visibility extensions sent for held messages."}),
		replyIgnored: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "reply_targets_ignored_total", Help: "Reply targets ignored because no webhook sink is configured."}),
		receiveErrors: prometheus.NewCounter(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "receive_errors_total", Help: "Failed receive calls."}),
		escalated: prometheus.NewCounterVec(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "decisions_escalated_total", Help: "Decisions sent on to another pool by a policy's escalate clause, by pool."}, []string{"from", "to"}),
	}
	cfg.Registry.MustRegister(m.received, m.deleted, m.released, m.invalid, m.decisions, m.published,
		m.publishErrors, m.inFlight, m.scoreSeconds, m.batchSeconds, m.panics, m.heartbeats, m.replyIgnored, m.receiveErrors, m.escalated)
	if dl, ok := cfg.Queue.(interface{ DeadLettered() int64 }); ok {
		cfg.Registry.MustRegister(prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: ns, Subsystem: sub,
			Name: "dead_lettered_total", Help: "Messages the local queue moved to its dead-letter table (SQS: see the DLQ's own metrics)."},
			func() float64 { return float64(dl.DeadLettered()) }))
	}
	if f := cfg.PrefixStatsFunc; f != nil {
		cfg.Registry.MustRegister(
			prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: ns, Subsystem: "engine",
				Name: "prefix_cache_hits_total", Help: "Decisions that reused a cached state prefix."},
				func() float64 { h, _ := f(); return float64(h) }),
			prometheus.NewCounterFunc(prometheus.CounterOpts{Namespace: ns, Subsystem: "engine",
				Name: "prefix_cache_misses_total", Help: "Decisions that found no cached state prefix."},
				func() float64 { _, m := f(); return float64(m) }))
	}
	return m
}

// Registry returns the registry holding the worker's metrics.
func (w *Worker) Registry() *prometheus.Registry { return w.cfg.Registry }

// Handler serves the worker's metrics in the Prometheus text format (mount
// it at /metrics).
func (w *Worker) Handler() http.Handler {
	return promhttp.HandlerFor(w.cfg.Registry, promhttp.HandlerOpts{Registry: w.cfg.Registry})
}
