package policy

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"regexp"
	"sort"
	"strings"

	"gopkg.in/yaml.v3"
)

// MaxFileBytes bounds a policy file.
const MaxFileBytes = 1 << 20

// DefaultKind is the name of the kind that applies when a decision names no
// kind and no kind's match patterns fit, unless default_kind says otherwise.
const DefaultKind = "default"

// Action keywords for fallback and on_error.
const (
	actAbstain = "abstain"
	actReview  = "review"
	actError   = "error"
	actOption  = "option"
)

// action is what a kind returns when a threshold fails (fallback) or
// scoring fails for good (on_error).
type action struct {
	kind   string // actAbstain, actReview, actError or actOption
	option string // for actOption
}

func (a action) String() string {
	if a.kind == actOption {
		return "option " + a.option
	}
	return a.kind
}

// matcher selects a kind by the decision's id and question.
type matcher struct {
	id, question *regexp.Regexp
}

func (m matcher) matches(id, question string) bool {
	return (m.id == nil || m.id.MatchString(id)) && (m.question == nil || m.question.MatchString(question))
}

// kind is one compiled section of kinds.
type kind struct {
	name        string
	declared    map[string]bool // nil: any option
	match       []matcher
	minProb     float64
	hasMinProb  bool
	minMargin   float64
	hasMinMarg  bool
	optionMin   map[string]float64
	temperature float64 // the kind's own; 0: not configured (the file's top-level one is Policy.temperature)
	debias      int     // 0: not configured
	rules       []*rule
	fallback    action
	onError     action
	escalate    *escalation // nil: never escalates
}

// Parse reads and validates a policy. Every problem is reported, each with
// its path, in a *LoadError that matches ErrInvalid.
func Parse(data []byte) (*Policy, error) {
	if len(data) > MaxFileBytes {
		return nil, &LoadError{Errors: []FieldError{{Message: fmt.Sprintf("policy is %d bytes, limit is %d", len(data), MaxFileBytes)}}}
	}
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		msg := "is empty"
		if err != io.EOF {
			msg = "is not valid YAML: " + oneLine(strings.TrimPrefix(err.Error(), "yaml: "))
		}
		return nil, &LoadError{Errors: []FieldError{{Message: "policy " + msg}}}
	}
	var extra yaml.Node
	if err := dec.Decode(&extra); err != io.EOF {
		return nil, &LoadError{Errors: []FieldError{{Message: "policy must be a single YAML document", Line: extra.Line}}}
	}
	if root.Kind != yaml.DocumentNode || len(root.Content) != 1 {
		return nil, &LoadError{Errors: []FieldError{{Message: "policy is empty"}}}
	}
	w := &walker{}
	p := w.policy(root.Content[0])
	if len(w.errs) > 0 {
		return nil, &LoadError{Errors: w.errs}
	}
	sum := sha256.Sum256(data)
	p.version = hex.EncodeToString(sum[:])
	return p, nil
}

// Load reads and validates the policy file at path.
func Load(path string) (*Policy, error) {
	data, err := readFile(path)
	if err != nil {
		return nil, err
	}
	p, err := Parse(data)
	if le, ok := err.(*LoadError); ok {
		le.File = path
	}
	return p, err
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrRead, err)
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxFileBytes+1))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrRead, path, err)
	}
	return data, nil
}

var topFields = []string{"version", "default_kind", "unknown_kind", "temperature", "rule_cost_limit", "kinds", "authorization"}

func (w *walker) policy(n *yaml.Node) *Policy {
	p := &Policy{kinds: map[string]*kind{}, costLimit: DefaultRuleCostLimit}
	top, ok := w.mapping(n, "", topFields)
	if !ok {
		return p
	}
	get := func(key string) *entry {
		for i := range top {
			if top[i].key == key {
				return &top[i]
			}
		}
		return nil
	}
	if e := get("version"); e != nil {
		w.integer(e.val, e.path, 1, 1)
	}
	if e := get("temperature"); e != nil {
		if t, ok := w.number(e.val, e.path, 0, 100, true); ok {
			p.temperature = t
		}
	}
	if e := get("rule_cost_limit"); e != nil {
		if v, ok := w.integer(e.val, e.path, 1, 1<<40); ok {
			p.costLimit = uint64(v)
		}
	}
	p.unknownKind = "default"
	if e := get("unknown_kind"); e != nil {
		if s, ok := w.str(e.val, e.path); ok {
			switch s {
			case "default", "refuse":
				p.unknownKind = s
			default:
				w.add(e.val, e.path, `must be "default" or "refuse", got %q`, s)
			}
		}
	}
	if e := get("kinds"); e != nil {
		if list, ok := w.mapping(e.val, e.path, nil); ok {
			for _, ke := range list {
				if msg := checkName(ke.key); msg != "" {
					w.add(ke.knode, ke.path, "kind name %s", msg)
					continue
				}
				k := w.kind(ke.val, ke.path, ke.key, p)
				p.kinds[k.name] = k
				p.order = append(p.order, k)
			}
		}
	}
	defName := DefaultKind
	if e := get("default_kind"); e != nil {
		if s, ok := w.name(e.val, e.path); ok {
			if p.kinds[s] == nil {
				w.add(e.val, e.path, "unknown kind %q (kinds: %s)", s, strings.Join(p.kindNames(), ", "))
			}
			defName = s
		}
	}
	if p.def = p.kinds[defName]; p.def == nil {
		p.def = &kind{name: defName, fallback: action{kind: actAbstain}, onError: action{kind: actError}}
	}
	if e := get("authorization"); e != nil {
		p.auth = w.authorization(e.val, e.path, p)
	}
	return p
}

// kindNames lists the configured kinds and the default kind, sorted.
func (p *Policy) kindNames() []string {
	names := make([]string, 0, len(p.kinds)+1)
	for n := range p.kinds {
		names = append(names, n)
	}
	if p.def != nil && p.kinds[p.def.name] == nil {
		names = append(names, p.def.name)
	}
	sort.Strings(names)
	return names
}

var kindFields = []string{"description", "match", "options", "min_probability", "min_margin", "option_min", "temperature", "debias", "rules", "fallback", "on_error", "escalate"}

func (w *walker) kind(n *yaml.Node, path, name string, p *Policy) *kind {
	k := &kind{name: name, fallback: action{kind: actAbstain}, onError: action{kind: actError}}
	fields, ok := w.mapping(n, path, kindFields)
	if !ok {
		return k
	}
	// options first: the other fields are checked against them.
	for _, e := range fields {
		if e.key == "options" {
			if ids, ok := w.names(e.val, e.path); ok {
				if len(ids) == 0 {
					w.add(e.val, e.path, "must not be empty (omit it to allow any option)")
				}
				k.declared = map[string]bool{}
				for _, id := range ids {
					k.declared[id] = true
				}
			}
		}
	}
	for _, e := range fields {
		switch e.key {
		case "description":
			w.str(e.val, e.path)
		case "match":
			k.match = w.matchers(e.val, e.path)
		case "min_probability":
			k.minProb, k.hasMinProb = w.number(e.val, e.path, 0, 1, false)
		case "min_margin":
			k.minMargin, k.hasMinMarg = w.number(e.val, e.path, 0, 1, false)
		case "option_min":
			list, ok := w.mapping(e.val, e.path, nil)
			if !ok {
				continue
			}
			k.optionMin = map[string]float64{}
			for _, oe := range list {
				if !w.optionRef(k, oe.knode, oe.path, oe.key) {
					continue
				}
				if v, ok := w.number(oe.val, oe.path, 0, 1, false); ok {
					k.optionMin[oe.key] = v
				}
			}
		case "temperature":
			if t, ok := w.number(e.val, e.path, 0, 100, true); ok {
				k.temperature = t
			}
		case "debias":
			if v, ok := w.integer(e.val, e.path, 0, 255); ok {
				k.debias = int(v)
			}
		case "rules":
			k.rules = w.rules(e.val, e.path, k, p.costLimit)
		case "fallback":
			k.fallback = w.action(e.val, e.path, k, false)
		case "on_error":
			k.onError = w.action(e.val, e.path, k, true)
		case "escalate":
			k.escalate = w.escalation(e.val, e.path)
		}
	}
	return k
}

// optionRef checks that an option named in a kind is declared by it.
func (w *walker) optionRef(k *kind, n *yaml.Node, path, id string) bool {
	if msg := checkName(id); msg != "" {
		w.add(n, path, "option id %s", msg)
		return false
	}
	if k.declared != nil && !k.declared[id] {
		w.add(n, path, "unknown option %q (options of kind %q: %s)", id, k.name, strings.Join(sortedKeys(k.declared), ", "))
		return false
	}
	return true
}

func sortedKeys(m map[string]bool) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func (w *walker) matchers(n *yaml.Node, path string) []matcher {
	var items []*yaml.Node
	var paths []string
	if n.Kind == yaml.MappingNode {
		items, paths = []*yaml.Node{n}, []string{path}
	} else {
		seq, ok := w.sequence(n, path)
		if !ok {
			return nil
		}
		for i, it := range seq {
			items = append(items, it)
			paths = append(paths, pathIndex(path, i))
		}
	}
	var out []matcher
	for i, it := range items {
		fields, ok := w.mapping(it, paths[i], []string{"id", "question"})
		if !ok {
			continue
		}
		if len(fields) == 0 {
			w.add(it, paths[i], `must set "id" or "question"`)
			continue
		}
		var m matcher
		good := true
		for _, e := range fields {
			s, ok := w.str(e.val, e.path)
			if !ok {
				good = false
				continue
			}
			if s == "" || len(s) > 4096 {
				w.add(e.val, e.path, "pattern must be 1..4096 bytes")
				good = false
				continue
			}
			re, err := regexp.Compile(s)
			if err != nil {
				w.add(e.val, e.path, "bad pattern: %s", strings.TrimPrefix(err.Error(), "error parsing regexp: "))
				good = false
				continue
			}
			if e.key == "id" {
				m.id = re
			} else {
				m.question = re
			}
		}
		if good {
			out = append(out, m)
		}
	}
	return out
}

func (w *walker) rules(n *yaml.Node, path string, k *kind, costLimit uint64) []*rule {
	items, ok := w.sequence(n, path)
	if !ok {
		return nil
	}
	var out []*rule
	seen := map[string]int{}
	for i, it := range items {
		rp := pathIndex(path, i)
		fields, ok := w.mapping(it, rp, []string{"name", "when", "option"})
		if !ok {
			continue
		}
		r := &rule{name: fmt.Sprintf("rules[%d]", i)}
		var hasWhen, hasOption, good = false, false, true
		for _, e := range fields {
			switch e.key {
			case "name":
				s, ok := w.name(e.val, e.path)
				if !ok {
					good = false
					continue
				}
				if j, dup := seen[s]; dup {
					w.add(e.val, e.path, "duplicate rule name %q (also %s)", s, pathIndex(path, j))
					good = false
					continue
				}
				seen[s] = i
				r.name = s
			case "when":
				hasWhen = true
				s, ok := w.str(e.val, e.path)
				if !ok {
					good = false
					continue
				}
				if strings.TrimSpace(s) == "" {
					w.add(e.val, e.path, "must not be empty")
					good = false
					continue
				}
				prg, msg := compileRule(s, costLimit)
				if msg != "" {
					w.add(e.val, e.path, "%s", msg)
					good = false
					continue
				}
				r.when, r.prg = s, prg
			case "option":
				hasOption = true
				s, ok := w.str(e.val, e.path)
				if !ok || !w.optionRef(k, e.val, e.path, s) {
					good = false
					continue
				}
				r.option = s
			}
		}
		if !hasWhen {
			w.add(it, pathJoin(rp, "when"), "is required")
			good = false
		}
		if !hasOption {
			w.add(it, pathJoin(rp, "option"), "is required")
			good = false
		}
		if good {
			out = append(out, r)
		}
	}
	return out
}

// action reads fallback or on_error: "abstain", "review", ("error" for
// on_error) or {option: ID}.
func (w *walker) action(n *yaml.Node, path string, k *kind, onError bool) action {
	def := action{kind: actAbstain}
	want := `"abstain", "review" or {option: ID}`
	if onError {
		def = action{kind: actError}
		want = `"error", "abstain", "review" or {option: ID}`
	}
	if !w.usable(n, path) {
		return def
	}
	if n.Kind == yaml.MappingNode {
		fields, ok := w.mapping(n, path, []string{"option"})
		if !ok {
			return def
		}
		if len(fields) == 0 {
			w.add(n, path, "must be %s", want)
			return def
		}
		s, ok := w.str(fields[0].val, fields[0].path)
		if !ok || !w.optionRef(k, fields[0].val, fields[0].path, s) {
			return def
		}
		return action{kind: actOption, option: s}
	}
	s, ok := w.str(n, path)
	if !ok {
		return def
	}
	switch {
	case s == actAbstain, s == actReview, s == actError && onError:
		return action{kind: s}
	}
	w.add(n, path, "must be %s, got %q (to return an option, write {option: %s})", want, s, s)
	return def
}
