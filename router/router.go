package router

import (
	"crypto/sha256"
	"encoding/hex"

	"github.com/verdict-dev/verdict/decision"
)

// DefaultGPUTokenThreshold is the estimated prompt length, in tokens, above
// which decisions go to the gpu pool.
const DefaultGPUTokenThreshold = 2048

// Config says which queues exist and where long prompts go.
type Config struct {
	// GPUTokenThreshold: decisions whose estimated prompt is longer than
	// this many tokens go to the gpu pool. Defaults to 2048 (0 means the
	// default; use a negative value to never route by length).
	GPUTokenThreshold int
	// CPU is true when a cpu queue is configured. Defaults to false.
	CPU bool
	// GPU is true when a gpu queue is configured. Defaults to false.
	GPU bool
}

// Choose returns the pool for decisions that share one state (normally the
// decisions of one message). Rules, first match wins:
//  1. an explicit route on any decision (gpu beats cpu when they disagree);
//  2. priority "interactive" on any decision → gpu;
//  3. the longest estimated prompt above GPUTokenThreshold → gpu;
//  4. otherwise cpu.
//
// When the chosen pool has no queue configured, the other one is returned.
// With neither configured, the rule's choice is returned unchanged.
func (c Config) Choose(ds []decision.Decision) decision.Route {
	return c.available(c.rule(ds))
}

func (c Config) rule(ds []decision.Decision) decision.Route {
	explicit := decision.RouteAuto
	for i := range ds {
		switch ds[i].Route {
		case decision.RouteGPU:
			return decision.RouteGPU
		case decision.RouteCPU:
			explicit = decision.RouteCPU
		}
	}
	if explicit != decision.RouteAuto {
		return explicit
	}
	for i := range ds {
		if ds[i].Priority == decision.PriorityInteractive {
			return decision.RouteGPU
		}
	}
	threshold := c.GPUTokenThreshold
	if threshold == 0 {
		threshold = DefaultGPUTokenThreshold
	}
	if threshold > 0 {
		for i := range ds {
			if EstimateTokens(&ds[i]) > threshold {
				return decision.RouteGPU
			}
		}
	}
	return decision.RouteCPU
}

func (c Config) available(r decision.Route) decision.Route {
	switch {
	case r == decision.RouteGPU && !c.GPU && c.CPU:
		return decision.RouteCPU
	case r == decision.RouteCPU && !c.CPU && c.GPU:
		return decision.RouteGPU
	}
	return r
}

// EstimateTokens estimates a decision's prompt length in tokens as a
// quarter of the bytes of its state, question and options.
func EstimateTokens(d *decision.Decision) int {
	n := d.State.Len() + len(d.Question)
	for _, o := range d.Options {
		n += len(o.ID) + len(o.Description)
	}
	return n / 4
}

// GroupKey is the hex sha256 of the state's canonical bytes: equal states
// (JSON states compared after canonicalisation) give equal keys.
func GroupKey(s decision.State) string {
	sum := sha256.Sum256(s.Canonical())
	return hex.EncodeToString(sum[:])
}

// Group partitions decisions by the group key of their state. Each value
// lists indexes into ds in their original order.
func Group(ds []decision.Decision) map[string][]int {
	g := make(map[string][]int)
	for i := range ds {
		k := GroupKey(ds[i].State)
		g[k] = append(g[k], i)
	}
	return g
}
