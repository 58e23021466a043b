package auth

import (
	"crypto/sha256"
	"crypto/subtle"
	"errors"
	"fmt"
	"net"
	"net/http"
	"regexp"
	"strings"

	"github.com/verdict-dev/verdict/decision"
)

// Sentinel errors. The refusals (ErrNoKey, ErrBadKey, ErrTwoKeys) read well
// to a caller once Message strips the package prefix.
var (
	// ErrNoKey: the request carries no key and anonymous callers are not
	// accepted.
	ErrNoKey = errors.New("auth: an API key is required (send Authorization: Bearer KEY or X-Api-Key: KEY)")
	// ErrBadKey: the presented key matches no configured key.
	ErrBadKey = errors.New("auth: invalid API key")
	// ErrTwoKeys: Authorization and X-Api-Key carry different keys.
	ErrTwoKeys = errors.New("auth: Authorization: Bearer and X-Api-Key carry different keys; send one")
	// ErrConfig: a configured key is unusable; the message says which
	// entry (never the key).
	ErrConfig = errors.New("auth: invalid API keys")
	// ErrAuthRequired: the listen address is reachable from other hosts and
	// no API keys were configured.
	ErrAuthRequired = errors.New("auth: API keys are required when listening on a non-loopback address")
)

// Code is the "code" of every 401 answer.
const Code = decision.CodeUnauthorized

// Challenge is the WWW-Authenticate header of every 401 answer.
const Challenge = `Bearer realm="verdict"`

// Message is the text a 401 answer shows for a refusal err.
func Message(err error) string {
	return strings.TrimPrefix(err.Error(), "auth: ")
}

// Open reports whether a path is served without a key: the health checks
// /ping and /healthz. It is the same list for every listener.
func Open(path string) bool {
	return path == "/ping" || path == "/healthz"
}

// Caller is who sent a request.
type Caller struct {
	// Tenant is the tenant of the key, or the platform identity; "" for
	// anonymous callers and the default tenant.
	Tenant string
	// Key is the presented key when it was checked ("" otherwise); policies
	// authorize by its hash.
	Key string
	// Identity is the platform identity given to Check, when there was one.
	Identity string
	// Review is true for a key granted the review inbox (KEY=TENANT:review).
	Review bool
}

type entry struct {
	sum    [sha256.Size]byte
	tenant string
	review bool
}

// ReviewGrant ends a key list entry's tenant to grant the key the review
// inbox (KEY=TENANT:review): reading the states of decisions sent to
// review.
const ReviewGrant = ":review"

// Authenticator checks the keys of requests. It is safe for concurrent use.
type Authenticator struct {
	keys      []entry
	anonymous bool
}

// New builds an Authenticator over keys (key → tenant, "" the default
// tenant). anonymous accepts callers that present no key. A key that is
// empty or holds whitespace is refused with ErrConfig.
func New(keys map[string]string, anonymous bool) (*Authenticator, error) {
	a := &Authenticator{anonymous: anonymous, keys: make([]entry, 0, len(keys))}
	for k, t := range keys {
		if strings.TrimSpace(k) == "" || strings.ContainsAny(k, " \t\r\n") {
			return nil, fmt.Errorf("%w: the key of tenant %q is empty or contains whitespace", ErrConfig, t)
		}
		tenant, review := strings.CutSuffix(t, ReviewGrant)
		a.keys = append(a.keys, entry{sum: sha256.Sum256([]byte(k)), tenant: tenant, review: review})
	}
	return a, nil
}

// Enabled reports whether keys are configured.
func (a *Authenticator) Enabled() bool { return len(a.keys) > 0 }

// lookup finds the tenant of a key: its digest is compared with every
// configured digest, in constant time each, and the loop never stops early.
func (a *Authenticator) lookup(key string) (entry, bool) {
	sum := sha256.Sum256([]byte(key))
	found := -1
	for i := range a.keys {
		if subtle.ConstantTimeCompare(sum[:], a.keys[i].sum[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return entry{}, false
	}
	return a.keys[found], true
}

// Check names the caller of a request from its headers. identity is an
// identity a trusted platform established for the request ("" for none).
// The error is ErrNoKey, ErrBadKey or ErrTwoKeys; answer it with 401.
func (a *Authenticator) Check(h http.Header, identity string) (Caller, error) {
	key, err := Presented(h)
	if err != nil {
		return Caller{}, err
	}
	if key != "" && a.Enabled() {
		e, ok := a.lookup(key)
		if !ok {
			return Caller{}, ErrBadKey
		}
		return Caller{Tenant: e.tenant, Key: key, Identity: identity, Review: e.review}, nil
	}
	switch {
	case identity != "":
		return Caller{Tenant: identity, Identity: identity}, nil
	case a.anonymous:
		return Caller{}, nil
	case key != "":
		return Caller{}, ErrBadKey
	}
	return Caller{}, ErrNoKey
}

// Presented returns the key a request carries (see the package comment for
// the headers), "" for none, or ErrTwoKeys.
func Presented(h http.Header) (string, error) {
	bearer := ""
	if v := strings.TrimSpace(h.Get("Authorization")); len(v) > len("bearer ") && strings.EqualFold(v[:len("bearer ")], "bearer ") {
		bearer = strings.TrimSpace(v[len("bearer "):])
	}
	apiKey := strings.TrimSpace(h.Get("X-Api-Key"))
	switch {
	case bearer == "":
		return apiKey, nil
	case apiKey == "" || apiKey == bearer:
		return bearer, nil
	}
	return "", ErrTwoKeys
}

// tenantRe is what may follow the last '=' of a key list entry as a
// tenant; anything else (base64 padding, say) belongs to the key.
var tenantRe = regexp.MustCompile(`^[A-Za-z0-9_.:@-]+$`)

// ParseKeys parses a key list, the format of --api-keys and
// VERDICT_API_KEYS: comma-separated entries, each KEY, KEY=TENANT or
// KEY=TENANT:review (a key granted the review inbox; see ReviewGrant) (the
// tenant follows the last '='; a key may itself contain '=', as base64
// padding does). It returns key → tenant. Errors name the entry, never the
// key.
func ParseKeys(s string) (map[string]string, error) {
	out := map[string]string{}
	for i, part := range strings.Split(s, ",") {
		part = strings.TrimSpace(part)
		if part == "" {
			continue
		}
		key, tenant := part, ""
		if j := strings.LastIndexByte(part, '='); j > 0 && tenantRe.MatchString(part[j+1:]) {
			key, tenant = part[:j], part[j+1:]
		}
		if strings.ContainsAny(key, " \t") {
			return nil, fmt.Errorf("entry %d: a key must not contain spaces", i+1)
		}
		if _, dup := out[key]; dup {
			return nil, fmt.Errorf("entry %d: duplicate key", i+1)
		}
		out[key] = tenant
	}
	return out, nil
}

// IsLoopback reports whether a listen address (HOST:PORT) only accepts
// connections from this host: 127.0.0.0/8, ::1 or "localhost". An empty
// host (":8080") listens on every interface and is not loopback.
func IsLoopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		host = addr
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}

// CheckBind refuses to listen without keys on an address other hosts can
// reach: it returns ErrAuthRequired when addr is not loopback, haveKeys is
// false and noAuth (an explicit opt-out, e.g. inside a SageMaker container
// where the platform authenticates callers) is false.
func CheckBind(addr string, haveKeys, noAuth bool) error {
	if haveKeys || noAuth || IsLoopback(addr) {
		return nil
	}
	return fmt.Errorf("%w (address %q): give --api-keys or bind to 127.0.0.1", ErrAuthRequired, addr)
}
