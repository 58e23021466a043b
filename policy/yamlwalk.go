package policy

import (
	"fmt"
	"math"
	"strings"

	"gopkg.in/yaml.v3"
)

// walker reads a YAML node tree and collects problems with their paths. It
// never follows aliases, so a hostile file cannot expand exponentially.
type walker struct {
	errs []FieldError
}

func (w *walker) add(n *yaml.Node, path, format string, args ...any) {
	line := 0
	if n != nil {
		line = n.Line
	}
	w.errs = append(w.errs, FieldError{Path: path, Message: fmt.Sprintf(format, args...), Line: line})
}

// pathJoin builds "a.b": pathJoin("", "kinds") = "kinds".
func pathJoin(base, key string) string {
	if base == "" {
		return key
	}
	return base + "." + key
}

func pathIndex(base string, i int) string { return fmt.Sprintf("%s[%d]", base, i) }

// nodeKind names a node's type for error messages.
func nodeKind(n *yaml.Node) string {
	switch n.Kind {
	case yaml.MappingNode:
		return "a mapping"
	case yaml.SequenceNode:
		return "a list"
	case yaml.AliasNode:
		return "an alias"
	case yaml.ScalarNode:
		switch n.Tag {
		case "!!null":
			return "null"
		case "!!bool":
			return "a boolean"
		case "!!int", "!!float":
			return "a number"
		case "!!str":
			return "a string"
		}
		return "a scalar (" + n.Tag + ")"
	}
	return "nothing"
}

// usable rejects aliases; it reports false after recording the problem.
func (w *walker) usable(n *yaml.Node, path string) bool {
	if n.Kind == yaml.AliasNode {
		w.add(n, path, "aliases are not supported")
		return false
	}
	return true
}

// entry is one key/value pair of a mapping, in document order.
type entry struct {
	key   string
	knode *yaml.Node
	val   *yaml.Node
	path  string
}

// mapping returns the pairs of a mapping node. known, when non-nil, lists
// the allowed keys; any other key is reported. Duplicate and non-string keys
// are reported and skipped.
func (w *walker) mapping(n *yaml.Node, path string, known []string) ([]entry, bool) {
	if !w.usable(n, path) {
		return nil, false
	}
	if n.Kind != yaml.MappingNode {
		w.add(n, path, "must be a mapping, got %s", nodeKind(n))
		return nil, false
	}
	var out []entry
	seen := map[string]bool{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if k.Kind != yaml.ScalarNode || k.Tag == "!!null" {
			w.add(k, path, "keys must be strings, got %s", nodeKind(k))
			continue
		}
		kp := pathJoin(path, k.Value)
		if k.Tag == "!!merge" || k.Value == "<<" && k.Style == 0 {
			w.add(k, kp, "merge keys are not supported")
			continue
		}
		if seen[k.Value] {
			w.add(k, kp, "duplicate key")
			continue
		}
		seen[k.Value] = true
		if known != nil && !contains(known, k.Value) {
			w.add(k, kp, "unknown field %q (known: %s)", k.Value, strings.Join(known, ", "))
			continue
		}
		out = append(out, entry{key: k.Value, knode: k, val: v, path: kp})
	}
	return out, true
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

// sequence returns the items of a list node; null is an empty list.
func (w *walker) sequence(n *yaml.Node, path string) ([]*yaml.Node, bool) {
	if !w.usable(n, path) {
		return nil, false
	}
	if n.Kind == yaml.ScalarNode && n.Tag == "!!null" {
		return nil, true // "rules:" with every entry commented out
	}
	if n.Kind != yaml.SequenceNode {
		w.add(n, path, "must be a list, got %s", nodeKind(n))
		return nil, false
	}
	return n.Content, true
}

// str reads a scalar as a string. Numbers are accepted as their literal
// text (option ids such as "1" are common); null, booleans, lists and
// mappings are not.
func (w *walker) str(n *yaml.Node, path string) (string, bool) {
	if !w.usable(n, path) {
		return "", false
	}
	if n.Kind != yaml.ScalarNode || n.Tag == "!!null" || n.Tag == "!!bool" {
		w.add(n, path, "must be a string, got %s", nodeKind(n))
		return "", false
	}
	return n.Value, true
}

// name reads an identifier: non-empty, at most 128 bytes, no whitespace or
// control characters.
func (w *walker) name(n *yaml.Node, path string) (string, bool) {
	s, ok := w.str(n, path)
	if !ok {
		return "", false
	}
	if msg := checkName(s); msg != "" {
		w.add(n, path, "%s", msg)
		return "", false
	}
	return s, true
}

func checkName(s string) string {
	switch {
	case s == "":
		return "must not be empty"
	case len(s) > 128:
		return fmt.Sprintf("is %d bytes, limit is 128", len(s))
	case strings.TrimSpace(s) != s:
		return "must not start or end with whitespace"
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == 0xfffd {
			return "must not contain control characters or invalid UTF-8"
		}
	}
	return ""
}

// names reads a list of distinct identifiers.
func (w *walker) names(n *yaml.Node, path string) ([]string, bool) {
	items, ok := w.sequence(n, path)
	if !ok {
		return nil, false
	}
	out := make([]string, 0, len(items))
	seen := map[string]int{}
	good := true
	for i, it := range items {
		p := pathIndex(path, i)
		s, ok := w.name(it, p)
		if !ok {
			good = false
			continue
		}
		if j, dup := seen[s]; dup {
			w.add(it, p, "duplicate %q (also %s)", s, pathIndex(path, j))
			good = false
			continue
		}
		seen[s] = i
		out = append(out, s)
	}
	return out, good
}

// number reads a finite number within [lo, hi].
func (w *walker) number(n *yaml.Node, path string, lo, hi float64, loOpen bool) (float64, bool) {
	if !w.usable(n, path) {
		return 0, false
	}
	if n.Kind != yaml.ScalarNode || (n.Tag != "!!int" && n.Tag != "!!float") {
		w.add(n, path, "must be a number, got %s", nodeKind(n))
		return 0, false
	}
	var f float64
	if err := n.Decode(&f); err != nil {
		w.add(n, path, "must be a number: %v", err)
		return 0, false
	}
	switch {
	case math.IsNaN(f) || math.IsInf(f, 0):
		w.add(n, path, "must be a finite number, got %s", n.Value)
		return 0, false
	case loOpen && f <= lo, f < lo, f > hi:
		open := "["
		if loOpen {
			open = "("
		}
		w.add(n, path, "must be in %s%g, %g], got %s", open, lo, hi, n.Value)
		return 0, false
	}
	return f, true
}

// integer reads a whole number within [lo, hi].
func (w *walker) integer(n *yaml.Node, path string, lo, hi int64) (int64, bool) {
	if !w.usable(n, path) {
		return 0, false
	}
	if n.Kind != yaml.ScalarNode || n.Tag != "!!int" {
		w.add(n, path, "must be a whole number, got %s", nodeKind(n))
		return 0, false
	}
	var v int64
	if err := n.Decode(&v); err != nil {
		w.add(n, path, "must be a whole number: %v", err)
		return 0, false
	}
	if v < lo || v > hi {
		w.add(n, path, "must be in [%d, %d], got %d", lo, hi, v)
		return 0, false
	}
	return v, true
}
