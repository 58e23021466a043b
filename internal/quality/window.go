package quality

import (
	"cmp"
	"slices"
	"sync"

	"github.com/verdict-dev/verdict/internal/eval"
	"github.com/verdict-dev/verdict/internal/results"
)

// DefaultSize is how many of the latest labels a window holds.
const DefaultSize = 200

// Config configures a Window.
type Config struct {
	// Size is how many of the latest labeled decisions each group's
	// window holds. Defaults to DefaultSize.
	Size int
	// Bins is the number of equal-width ECE bins. Defaults to
	// DefaultBins.
	Bins int
}

// Window holds, for each policy kind and model, the latest labeled
// decisions, and counts every answer. Safe for concurrent use; it is a
// prometheus.Collector (metrics.go).
type Window struct {
	cfg    Config
	mu     sync.Mutex
	groups map[Key]*group
}

// group is one kind and model's window and counters.
type group struct {
	// entries are the latest labeled decisions, oldest first.
	entries []entry
	// agreed and disagreed count every answer observed.
	agreed, disagreed int64
}

// entry is one labeled decision of a window.
type entry struct {
	// id is the decision's request id + decision id.
	id string
	ex eval.Example
}

// New returns an empty Window.
func New(cfg Config) *Window {
	if cfg.Size < 1 {
		cfg.Size = DefaultSize
	}
	if cfg.Bins < 1 {
		cfg.Bins = DefaultBins
	}
	return &Window{cfg: cfg, groups: map[Key]*group{}}
}

// Observe adds an answer the front door recorded: the decision's stored
// record and its new label. A decision already in its window moves to
// the end with the new label, so a window holds each decision once, with
// its current label, as the results store's labeled decisions do. A
// label that is not one of the decision's options is ignored.
func (w *Window) Observe(stored results.Stored, label results.Feedback) {
	ex, ok := ExampleOf(stored, label)
	if !ok {
		return
	}
	key, id := KeyOf(&stored.Record.Result), stored.Record.Key()
	w.mu.Lock()
	defer w.mu.Unlock()
	g := w.groups[key]
	if g == nil {
		g = &group{}
		w.groups[key] = g
	}
	g.entries = slices.DeleteFunc(g.entries, func(e entry) bool { return e.id == id })
	g.entries = append(g.entries, entry{id: id, ex: ex})
	if n := len(g.entries) - w.cfg.Size; n > 0 {
		g.entries = slices.Delete(g.entries, 0, n)
	}
	if Agrees(&ex) {
		g.agreed++
	} else {
		g.disagreed++
	}
}

// Group is one kind and model's window now.
type Group struct {
	Key
	// Window are the figures of the latest labeled decisions.
	Window Stats `json:"window"`
	// Agreed and Disagreed count every answer observed since the start.
	Agreed    int64 `json:"agreed_total"`
	Disagreed int64 `json:"disagreed_total"`
}

// Snapshot measures every group's window, ordered by kind then model.
func (w *Window) Snapshot() []Group {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make([]Group, 0, len(w.groups))
	ex := make([]eval.Example, 0, w.cfg.Size)
	for k, g := range w.groups {
		ex = ex[:0]
		for _, e := range g.entries {
			ex = append(ex, e.ex)
		}
		out = append(out, Group{Key: k, Window: Measure(ex, w.cfg.Bins), Agreed: g.agreed, Disagreed: g.disagreed})
	}
	slices.SortFunc(out, func(a, b Group) int {
		return cmp.Or(cmp.Compare(a.Kind, b.Kind), cmp.Compare(a.Model, b.Model))
	})
	return out
}
