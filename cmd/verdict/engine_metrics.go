package main

import (
	"github.com/prometheus/client_golang/prometheus"

	"github.com/verdict-dev/verdict/engine/llamacpp"
)

// engineCollectors are the engine's counters as Prometheus series: prompt
// tokens submitted and actually evaluated (the rest came from shared or
// cached state prefixes), and prefix-cache hits and misses.
func engineCollectors(eng *llamacpp.Engine) []prometheus.Collector {
	counter := func(name, help string, v func(llamacpp.Stats) int64) prometheus.Collector {
		return prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help}, func() float64 { return float64(v(eng.Stats())) })
	}
	return []prometheus.Collector{
		counter("verdict_engine_tokens_submitted_total", "Prompt tokens of every decision scored.", func(s llamacpp.Stats) int64 { return s.TokensSubmitted }),
		counter("verdict_engine_tokens_evaluated_total", "Prompt tokens the model computed (the rest were shared or cached state prefixes).", func(s llamacpp.Stats) int64 { return s.TokensEvaluated }),
		counter("verdict_engine_prefix_hits_total", "Decisions whose state prefix was found in the prefix cache.", func(s llamacpp.Stats) int64 { return s.PrefixHits }),
		counter("verdict_engine_prefix_misses_total", "Decisions whose state prefix had to be prefilled.", func(s llamacpp.Stats) int64 { return s.PrefixMisses }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "verdict_engine_decode_seconds_total", Help: "Time inside llama_decode: tokens evaluated over it is the rate the model computes at."},
			func() float64 { return float64(eng.Stats().DecodeNanos) / 1e9 }),
		prometheus.NewGaugeFunc(prometheus.GaugeOpts{Name: "verdict_engine_prefix_cache_host_bytes", Help: "Host memory holding cached state prefixes (--prefix-cache-store host)."},
			func() float64 { return float64(eng.Stats().CacheHostBytes) }),
		prometheus.NewCounterFunc(prometheus.CounterOpts{Name: "verdict_engine_prefix_cache_move_seconds_total", Help: "Time spent saving cached state prefixes to host memory and restoring them (--prefix-cache-store host)."},
			func() float64 { return float64(eng.Stats().CacheMoveNanos) / 1e9 }),
	}
}
