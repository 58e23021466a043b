package decision

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Option is one allowed answer. Its position in Decision.Options is its
// place in every response.
type Option struct {
	// ID is the caller's name for the option, unique within the decision.
	ID string `json:"id"`
	// Description tells the model what the option means. It may be empty
	// for options derived from System One criteria given as null.
	Description string `json:"description"`
}

// Route names the worker pool a decision should run on.
type Route string

// Routes.
const (
	RouteAuto Route = ""
	RouteCPU  Route = "cpu"
	RouteGPU  Route = "gpu"
)

// IsPool reports whether r names a worker pool (RouteCPU or RouteGPU);
// RouteAuto and anything else do not.
func (r Route) IsPool() bool { return r == RouteCPU || r == RouteGPU }

// Priority hints at how urgent a decision is.
type Priority string

// Priorities.
const (
	PriorityDefault     Priority = ""
	PriorityInteractive Priority = "interactive"
	PriorityBatch       Priority = "batch"
)

// Decision is one question about one state with an ordered set of options:
// the unit that is scored, decided by policy and published.
type Decision struct {
	// ID is caller-defined and echoed in the result. Unique within a request.
	ID string `json:"id"`
	// Kind selects the policy section that applies (optional).
	Kind string `json:"kind,omitempty"`
	// State is what the question is about.
	State State `json:"state"`
	// Question is asked about the state.
	Question string `json:"question"`
	// Options are the allowed answers, in response order.
	Options []Option `json:"options"`
	// Metadata is free caller data that policy rules can read.
	Metadata map[string]string `json:"metadata,omitempty"`
	// Route forces the cpu or gpu pool (optional).
	Route Route `json:"route,omitempty"`
	// Priority: "interactive" prefers the gpu pool (optional).
	Priority Priority `json:"priority,omitempty"`
	// Debias asks for option-order debiasing: score the decision under this
	// many cyclic rotations of its options (capped at the number of
	// options) and average each option's log-probability. 0 = the policy
	// kind's or the --debias setting; 1 = off. At most 255.
	Debias int `json:"debias,omitempty"`

	// KindTemperature is the policy kind's own temperature (0 = the kind
	// sets none), put here by policy.Before for the scorer; never on the
	// wire. It ranks above --temperature (see tune.Resolve).
	KindTemperature float64 `json:"-"`
	// PolicyTemperature is the policy file's top-level temperature, the
	// default of kinds that set none (0 = none), put here by policy.Before;
	// never on the wire. Being a default, it ranks below --temperature.
	PolicyTemperature float64 `json:"-"`
	// KindDebias is the policy kind's debias rotations (0 = none set), put
	// here by policy.Before; never on the wire.
	KindDebias int `json:"-"`
}

// OptionIDs returns the option ids in order.
func (d *Decision) OptionIDs() []string {
	ids := make([]string, len(d.Options))
	for i, o := range d.Options {
		ids[i] = o.ID
	}
	return ids
}

// Limits bound what a request may hold. The zero value of a field means its
// default, given in the field's comment.
type Limits struct {
	// MaxStateBytes bounds the state. Defaults to 256 KiB.
	MaxStateBytes int
	// MaxQuestionBytes bounds the question. Defaults to 16 KiB.
	MaxQuestionBytes int
	// MinOptions is the least number of options. Defaults to 2.
	MinOptions int
	// MaxOptions is the most options a decision may have. Defaults to 255.
	MaxOptions int
	// MaxOptionIDBytes bounds an option id. Defaults to 128.
	MaxOptionIDBytes int
	// MaxDescriptionBytes bounds an option description. Defaults to 4 KiB.
	MaxDescriptionBytes int
	// MaxIDBytes bounds a decision id. Defaults to 256.
	MaxIDBytes int
	// MaxDecisions bounds a batch ({"decisions": [...]}) and the questions
	// of a System One request. Defaults to 64.
	MaxDecisions int
	// MaxMetadata bounds the number of metadata entries. Defaults to 32;
	// each key and value is at most 1 KiB.
	MaxMetadata int
	// MaxScoreLevels bounds System One score questions. Defaults to 10.
	MaxScoreLevels int
}

// DefaultLimits returns the limits with every default filled in.
func DefaultLimits() Limits { return Limits{}.withDefaults() }

// StructuralLimits keeps the rules of a decision's shape (2–255 options,
// ids, metadata entries) and lifts every size limit. Stages behind an
// entry point (queue workers, engines) validate with it: the entry point
// enforced its configured sizes, and a later stage must not refuse what it
// accepted.
func StructuralLimits() Limits {
	const unbounded = 1 << 30
	return Limits{MaxStateBytes: unbounded, MaxQuestionBytes: unbounded, MaxDescriptionBytes: unbounded,
		MaxDecisions: unbounded}.withDefaults()
}

// WithDefaults returns l with every zero field set to its default.
func (l Limits) WithDefaults() Limits { return l.withDefaults() }

func (l Limits) withDefaults() Limits {
	def := func(v *int, d int) {
		if *v <= 0 {
			*v = d
		}
	}
	def(&l.MaxStateBytes, 256<<10)
	def(&l.MaxQuestionBytes, 16<<10)
	def(&l.MinOptions, 2)
	def(&l.MaxOptions, 255)
	def(&l.MaxOptionIDBytes, 128)
	def(&l.MaxDescriptionBytes, 4<<10)
	def(&l.MaxIDBytes, 256)
	def(&l.MaxDecisions, 64)
	def(&l.MaxMetadata, 32)
	def(&l.MaxScoreLevels, 10)
	return l
}

// Validate checks a decision built in code (the parsers check their input as
// they go). path prefixes every field path; use "" for a bare decision.
func (d *Decision) Validate(l Limits, path string) error {
	var errs fieldErrs
	d.validate(l.withDefaults(), path, &errs)
	return errs.err()
}

func (d *Decision) validate(l Limits, path string, errs *fieldErrs) {
	if d.ID != "" {
		checkID(d.ID, join(path, "id"), l.MaxIDBytes, errs)
	}
	if d.State.IsZero() {
		errs.add(join(path, "state"), "is required")
	} else if d.State.Len() > l.MaxStateBytes {
		errs.addLarge(join(path, "state"), "is %d bytes, limit is %d", d.State.Len(), l.MaxStateBytes)
	} else if !d.State.IsJSON() && strings.TrimSpace(d.State.Text) == "" {
		errs.add(join(path, "state"), "must not be empty or whitespace")
	}
	switch {
	case strings.TrimSpace(d.Question) == "":
		errs.add(join(path, "question"), "must not be empty or whitespace")
	case len(d.Question) > l.MaxQuestionBytes:
		errs.addLarge(join(path, "question"), "is %d bytes, limit is %d", len(d.Question), l.MaxQuestionBytes)
	case !utf8.ValidString(d.Question):
		errs.add(join(path, "question"), "is not valid UTF-8")
	}
	if d.Debias < 0 || d.Debias > 255 {
		errs.add(join(path, "debias"), "must be 0..255, got %d", d.Debias)
	}
	n := len(d.Options)
	switch {
	case n < l.MinOptions:
		errs.add(join(path, "options"), "has %d options, at least %d are required", n, l.MinOptions)
	case n > l.MaxOptions:
		errs.add(join(path, "options"), "has %d options, at most %d are allowed", n, l.MaxOptions)
	}
	seen := make(map[string]int, n)
	for i, o := range d.Options {
		p := join(path, "options", i)
		if checkID(o.ID, join(p, "id"), l.MaxOptionIDBytes, errs) {
			if j, dup := seen[o.ID]; dup {
				errs.add(join(p, "id"), "duplicate %q (also options[%d])", o.ID, j)
			} else {
				seen[o.ID] = i
			}
		}
		if len(o.Description) > l.MaxDescriptionBytes {
			errs.addLarge(join(p, "description"), "is %d bytes, limit is %d", len(o.Description), l.MaxDescriptionBytes)
		} else if !utf8.ValidString(o.Description) {
			errs.add(join(p, "description"), "is not valid UTF-8")
		}
	}
	if len(d.Metadata) > l.MaxMetadata {
		errs.add(join(path, "metadata"), "has %d entries, at most %d are allowed", len(d.Metadata), l.MaxMetadata)
	}
	for k, v := range d.Metadata {
		if k == "" || len(k) > 1024 || len(v) > 1024 {
			errs.add(join(path, "metadata", k), "keys must be 1..1024 bytes and values at most 1024 bytes")
		}
	}
	if d.Route != RouteAuto && !d.Route.IsPool() {
		errs.add(join(path, "route"), "must be \"cpu\" or \"gpu\", got %q", d.Route)
	}
	switch d.Priority {
	case PriorityDefault, PriorityInteractive, PriorityBatch:
	default:
		errs.add(join(path, "priority"), "must be \"interactive\" or \"batch\", got %q", d.Priority)
	}
}

// checkID validates an identifier: non-empty, not padded with spaces, no
// control characters, valid UTF-8, at most max bytes.
func checkID(id, path string, max int, errs *fieldErrs) bool {
	if p := IDProblem(id, max); p != "" {
		errs.add(path, "%s", p)
		return false
	}
	return true
}

// IDProblem is what is wrong with an id under the rule every id follows
// (a decision's, an option's, a System One key, and the ids a lookup
// names): not empty or whitespace, at most max bytes, valid UTF-8, no
// surrounding whitespace, no control characters. It is "" for a good id.
func IDProblem(id string, max int) string {
	switch {
	case strings.TrimSpace(id) == "":
		return "must not be empty or whitespace"
	case len(id) > max:
		return fmt.Sprintf("is %d bytes, limit is %d", len(id), max)
	case !utf8.ValidString(id):
		return "is not valid UTF-8"
	case strings.TrimSpace(id) != id:
		return "must not start or end with whitespace"
	case strings.IndexFunc(id, unicode.IsControl) >= 0:
		return "must not contain control characters"
	}
	return ""
}
