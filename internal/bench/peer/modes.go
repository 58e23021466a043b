package peer

import (
	"context"
	"fmt"
	"time"
)

// The workloads every system is measured on.
const (
	// shared is every question of each state.
	shared = "shared"
	// independent is each state's first question alone: nothing shared.
	independent = "independent"
)

// api is how a mode calls its server.
type api int

const (
	systemOneAPI  api = iota + 1 // verdict: one System One request per state
	semIfAPI                     // verdict: one SemIf decision per request
	completionAPI                // llama-server: one /completion per decision
)

// mode is one system called one way on one workload: its results (Mode),
// the server it drives, and the round's workload it sends.
type mode struct {
	Mode
	srv  *server
	api  api
	work *round // this round's states, its own ("Round r.m."); set by prepareRound
}

// plan is every mode, in the order of the report: the shared workload's
// modes, then the independent workload's, then the second llama-server
// build's (shared, independent).
func plan(cfg Config, s *servers) []*mode {
	n := cfg.Slots
	m := func(name, workload string, clients int, srv *server, a api) *mode {
		return &mode{Mode: Mode{Name: name, Workload: workload, Clients: clients}, srv: srv, api: a}
	}
	modes := []*mode{
		m("verdict System One, a request per state", shared, n, s.verdict, systemOneAPI),
		m("verdict SemIf, a request per decision", shared, n, s.verdict, semIfAPI),
		m("llama-server 1 slot, a completion per question", shared, 1, s.one, completionAPI),
		m(fmt.Sprintf("llama-server %d slots, a completion per question", n), shared, n, s.many, completionAPI),
		m("verdict SemIf, a request per decision", independent, n, s.verdict, semIfAPI),
		m("llama-server 1 slot, a completion per decision", independent, 1, s.one, completionAPI),
		m(fmt.Sprintf("llama-server %d slots, a completion per decision", n), independent, n, s.many, completionAPI),
	}
	if s.alt != nil {
		modes = append(modes,
			m("llama-server ("+cfg.AltLabel+") 1 slot, a completion per question", shared, 1, s.alt, completionAPI),
			m("llama-server ("+cfg.AltLabel+") 1 slot, a completion per decision", independent, 1, s.alt, completionAPI))
	}
	return modes
}

// cases are the states of the mode's workload.
func (m *mode) cases(cfg Config) [][]byte {
	if m.Workload == independent {
		return cfg.IndependentCases
	}
	return cfg.Cases
}

// decisions are the indexes of the decisions the mode sends from its
// round: every one (shared) or each state's first (independent).
func (m *mode) decisions() []int {
	if m.Workload == independent {
		return m.work.heads
	}
	return m.work.all()
}

// send sends the decisions idx of the mode's round to its server, from
// m.Clients clients at once, and returns the prompt tokens the server
// evaluated and each request's latency.
func (m *mode) send(ctx context.Context, c *client, idx []int) (int64, []time.Duration, error) {
	switch m.api {
	case systemOneAPI:
		return c.verdictSystemOne(ctx, m.srv.url, m.work, m.Clients)
	case semIfAPI:
		return c.verdictSemIf(ctx, m.srv.url, m.work, idx, m.Clients)
	default:
		return c.completions(ctx, m.srv.url, m.work, idx, m.Clients)
	}
}

// record adds one round's measurement: decisions over wall, the tokens
// evaluated, every request's latency.
func (m *Mode) record(decisions int, wall time.Duration, tokens int64, lat []time.Duration) {
	m.DecisionsPerSec = append(m.DecisionsPerSec, float64(decisions)/wall.Seconds())
	m.TokensEvaluated = append(m.TokensEvaluated, tokens)
	for _, l := range lat {
		m.LatencyMs = append(m.LatencyMs, float64(l.Microseconds())/1000)
	}
}
