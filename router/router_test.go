package router_test

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/router"
)

func dec(state string) decision.Decision {
	return decision.Decision{
		ID: "d", State: decision.TextState(state), Question: "q?",
		Options: []decision.Option{{ID: "a"}, {ID: "b"}},
	}
}

func TestChoose(t *testing.T) {
	t.Parallel()
	both := router.Config{CPU: true, GPU: true, GPUTokenThreshold: 100}
	short := dec("short state")
	long := dec(strings.Repeat("x", 1000))
	withRoute := func(d decision.Decision, r decision.Route) decision.Decision { d.Route = r; return d }
	withPrio := func(d decision.Decision, p decision.Priority) decision.Decision { d.Priority = p; return d }

	cases := []struct {
		name string
		cfg  router.Config
		ds   []decision.Decision
		want decision.Route
	}{
		{"short goes to cpu", both, []decision.Decision{short}, decision.RouteCPU},
		{"long goes to gpu", both, []decision.Decision{long}, decision.RouteGPU},
		{"explicit cpu wins over length", both, []decision.Decision{withRoute(long, decision.RouteCPU)}, decision.RouteCPU},
		{"explicit gpu wins", both, []decision.Decision{withRoute(short, decision.RouteGPU)}, decision.RouteGPU},
		{"explicit cpu wins over interactive", both, []decision.Decision{withPrio(withRoute(short, decision.RouteCPU), decision.PriorityInteractive)}, decision.RouteCPU},
		{"interactive goes to gpu", both, []decision.Decision{withPrio(short, decision.PriorityInteractive)}, decision.RouteGPU},
		{"batch priority is cpu", both, []decision.Decision{withPrio(short, decision.PriorityBatch)}, decision.RouteCPU},
		{"gpu not configured falls back to cpu", router.Config{CPU: true, GPUTokenThreshold: 100}, []decision.Decision{long}, decision.RouteCPU},
		{"cpu not configured falls back to gpu", router.Config{GPU: true}, []decision.Decision{short}, decision.RouteGPU},
		{"negative threshold never routes by length", router.Config{CPU: true, GPU: true, GPUTokenThreshold: -1}, []decision.Decision{long}, decision.RouteCPU},
		{"default threshold is 2048 tokens", router.Config{CPU: true, GPU: true}, []decision.Decision{long}, decision.RouteCPU},
		{"any long decision in the group", both, []decision.Decision{short, long}, decision.RouteGPU},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			require.Equal(t, tc.want, tc.cfg.Choose(tc.ds))
		})
	}
}

func TestEstimateTokens(t *testing.T) {
	t.Parallel()
	d := decision.Decision{State: decision.TextState("12345678"), Question: "1234",
		Options: []decision.Option{{ID: "ab", Description: "cdef"}, {ID: "gh"}}}
	require.Equal(t, (8+4+2+4+2)/4, router.EstimateTokens(&d))
}

func TestGroupKey(t *testing.T) {
	t.Parallel()
	var a, b decision.State
	require.NoError(t, json.Unmarshal([]byte(`{"b": 1, "a": [1, 2]}`), &a))
	require.NoError(t, json.Unmarshal([]byte(`{"a":[1,2],"b":1}`), &b))
	require.Equal(t, router.GroupKey(a), router.GroupKey(b), "canonical JSON states share a key")
	require.Len(t, router.GroupKey(a), 64)
	require.NotEqual(t, router.GroupKey(decision.TextState("x")), router.GroupKey(decision.TextState("y")))
	// A text state that spells a JSON document is not the same state.
	require.NotEqual(t, router.GroupKey(decision.TextState(`{"a":[1,2],"b":1}`)), router.GroupKey(a))

	ds := []decision.Decision{dec("s1"), dec("s2"), dec("s1")}
	g := router.Group(ds)
	require.Len(t, g, 2)
	require.Equal(t, []int{0, 2}, g[router.GroupKey(ds[0].State)])
	require.Equal(t, []int{1}, g[router.GroupKey(ds[1].State)])
}
