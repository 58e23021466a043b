package policy

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"strings"

	"gopkg.in/yaml.v3"
)

// grant says what one caller (or every unlisted caller) may receive.
type grant struct {
	name      string
	tenant    string
	hasTenant bool
	keyHash   []byte // sha256 of the API key; nil: any key
	kinds     map[string]bool
	options   map[string]bool
	refuse    bool // mode refuse; otherwise filter
}

// authorization is the compiled authorization section.
type authorization struct {
	callers  []*grant
	unlisted *grant // nil: unlisted callers are refused
}

var authFields = []string{"unlisted", "mode", "callers"}
var grantFields = []string{"name", "tenant", "api_key", "api_key_sha256", "kinds", "options", "mode"}

func (w *walker) authorization(n *yaml.Node, path string, p *Policy) *authorization {
	a := &authorization{}
	fields, ok := w.mapping(n, path, authFields)
	if !ok {
		return a
	}
	refuse := false
	for _, e := range fields {
		if e.key == "mode" {
			refuse = w.mode(e.val, e.path)
		}
	}
	type key struct{ tenant, hash string }
	seen := map[key]int{}
	for _, e := range fields {
		switch e.key {
		case "unlisted":
			if e.val.Kind == yaml.ScalarNode {
				s, ok := w.str(e.val, e.path)
				if !ok {
					continue
				}
				switch s {
				case "allow":
					a.unlisted = &grant{name: "unlisted", refuse: refuse}
				case "refuse":
				default:
					w.add(e.val, e.path, `must be "allow", "refuse" or a mapping with kinds, options and mode, got %q`, s)
				}
				continue
			}
			g := w.grant(e.val, e.path, p, refuse, false)
			if g != nil {
				g.name = "unlisted"
				a.unlisted = g
			}
		case "callers":
			items, ok := w.sequence(e.val, e.path)
			if !ok {
				continue
			}
			for i, it := range items {
				cp := pathIndex(e.path, i)
				g := w.grant(it, cp, p, refuse, true)
				if g == nil {
					continue
				}
				if g.name == "" {
					g.name = fmt.Sprintf("callers[%d]", i)
				}
				k := key{g.tenant, string(g.keyHash)}
				if !g.hasTenant {
					k.tenant = "\x00any"
				}
				if j, dup := seen[k]; dup {
					w.add(it, cp, "matches the same callers as %s", pathIndex(e.path, j))
					continue
				}
				seen[k] = i
				a.callers = append(a.callers, g)
			}
		}
	}
	return a
}

func (w *walker) mode(n *yaml.Node, path string) bool {
	s, ok := w.str(n, path)
	if !ok {
		return false
	}
	switch s {
	case "filter":
		return false
	case "refuse":
		return true
	}
	w.add(n, path, `must be "filter" or "refuse", got %q`, s)
	return false
}

func (w *walker) grant(n *yaml.Node, path string, p *Policy, refuse, listed bool) *grant {
	known := grantFields
	if !listed {
		known = []string{"kinds", "options", "mode"}
	}
	fields, ok := w.mapping(n, path, known)
	if !ok {
		return nil
	}
	g := &grant{refuse: refuse}
	good := true
	var optNode *yaml.Node
	var optPath string
	for _, e := range fields {
		switch e.key {
		case "name":
			s, ok := w.name(e.val, e.path)
			good = good && ok
			g.name = s
		case "tenant":
			s, ok := w.name(e.val, e.path)
			good = good && ok
			g.tenant, g.hasTenant = s, true
		case "api_key":
			s, ok := w.str(e.val, e.path)
			if ok && len(s) < 8 {
				w.add(e.val, e.path, "must be at least 8 characters")
				ok = false
			}
			if g.keyHash != nil {
				w.add(e.val, e.path, "set either api_key or api_key_sha256, not both")
				ok = false
			}
			good = good && ok
			sum := sha256.Sum256([]byte(s))
			g.keyHash = sum[:]
		case "api_key_sha256":
			s, ok := w.str(e.val, e.path)
			var b []byte
			if ok {
				var err error
				b, err = hex.DecodeString(strings.ToLower(s))
				if err != nil || len(b) != sha256.Size {
					w.add(e.val, e.path, "must be 64 hex digits (the sha256 of the key)")
					ok = false
				}
			}
			if g.keyHash != nil {
				w.add(e.val, e.path, "set either api_key or api_key_sha256, not both")
				ok = false
			}
			good = good && ok
			g.keyHash = b
		case "kinds":
			ids, ok := w.names(e.val, e.path)
			good = good && ok
			g.kinds = map[string]bool{}
			items := e.val.Content
			for i, id := range ids {
				if p.kinds[id] == nil && id != p.def.name {
					at := e.val
					if i < len(items) {
						at = items[i]
					}
					w.add(at, pathIndex(e.path, i), "unknown kind %q (kinds: %s)", id, strings.Join(p.kindNames(), ", "))
					good = false
				}
				g.kinds[id] = true
			}
		case "options":
			ids, ok := w.names(e.val, e.path)
			good = good && ok
			g.options = map[string]bool{}
			for _, id := range ids {
				g.options[id] = true
			}
			optNode, optPath = e.val, e.path
		case "mode":
			g.refuse = w.mode(e.val, e.path)
		}
	}
	if listed && !g.hasTenant && g.keyHash == nil {
		w.add(n, path, "must set tenant, api_key or api_key_sha256")
		good = false
	}
	// Options can be checked when every kind the caller may use declares
	// its options.
	if optNode != nil && g.options != nil {
		declared := map[string]bool{}
		checkable := true
		scope := g.kinds
		if scope == nil {
			scope = map[string]bool{p.def.name: true}
			for n := range p.kinds {
				scope[n] = true
			}
		}
		for n := range scope {
			k := p.kinds[n]
			if n == p.def.name {
				k = p.def
			}
			if k == nil || k.declared == nil {
				checkable = false
				break
			}
			for id := range k.declared {
				declared[id] = true
			}
		}
		if checkable {
			for i, it := range optNode.Content {
				if it.Kind == yaml.ScalarNode && !declared[it.Value] {
					w.add(it, pathIndex(optPath, i), "unknown option %q (options of the caller's kinds: %s)", it.Value, strings.Join(sortedKeys(declared), ", "))
					good = false
				}
			}
		}
	}
	if !good {
		return nil
	}
	return g
}
