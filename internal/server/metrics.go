package server

import (
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// metrics are the server's Prometheus series.
type metrics struct {
	requests  *prometheus.CounterVec   // by route and status code
	duration  *prometheus.HistogramVec // by route
	decisions *prometheus.CounterVec   // by format
	rejected  *prometheus.CounterVec   // 503s by reason
}

func newMetrics(reg *prometheus.Registry, s *Server) *metrics {
	m := &metrics{
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "verdict_http_requests_total",
			Help: "HTTP requests answered, by route and status code.",
		}, []string{"route", "code"}),
		duration: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name:    "verdict_http_request_duration_seconds",
			Help:    "Time from receiving a request to its answer, by route.",
			Buckets: []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60},
		}, []string{"route"}),
		decisions: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "verdict_decisions_total",
			Help: "Decisions answered, by request format (semif, systemone).",
		}, []string{"format"}),
		rejected: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "verdict_rejected_total",
			Help: "Requests answered 503 with Retry-After, by reason (queue_full, engine_busy, loading).",
		}, []string{"reason"}),
	}
	reg.MustRegister(m.requests, m.duration, m.decisions, m.rejected,
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "verdict_admission_in_flight",
			Help: "Requests scoring now.",
		}, func() float64 { return float64(s.adm.inFlight()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "verdict_admission_waiting",
			Help: "Requests admitted and waiting for a scoring slot (or reading their body).",
		}, func() float64 { return float64(s.adm.waiting()) }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{
			Name: "verdict_model_ready",
			Help: "1 when the model is loaded and requests are scored, 0 while loading.",
		}, func() float64 {
			if s.Ready() {
				return 1
			}
			return 0
		}),
	)
	return m
}

// NewRegistry is the registry a Server uses when Config.Registry is nil:
// the Go runtime and process collectors. Pass one to add series of your
// own (the engine's token counters) to /metrics.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}
