package lambda

import (
	"crypto/sha256"
	"crypto/subtle"
	"net/http"
	"strings"
)

// apiKey is a configured key, kept as its sha256 so that every comparison
// has the same length and takes the same time.
type apiKey struct {
	sum    [sha256.Size]byte
	key    string
	tenant string
}

func hashKeys(keys map[string]string) []apiKey {
	out := make([]apiKey, 0, len(keys))
	for k, t := range keys {
		out = append(out, apiKey{sum: sha256.Sum256([]byte(k)), key: k, tenant: t})
	}
	return out
}

// lookupKey finds the tenant of a presented key. It compares against every
// configured key, in constant time each, and never stops early.
func (h *Handler) lookupKey(presented string) (string, bool) {
	sum := sha256.Sum256([]byte(presented))
	found := -1
	for i := range h.keys {
		if subtle.ConstantTimeCompare(sum[:], h.keys[i].sum[:]) == 1 {
			found = i
		}
	}
	if found < 0 {
		return "", false
	}
	return h.keys[found].tenant, true
}

// presentedKey returns the API key of a request: X-Api-Key, else the token
// of "Authorization: Bearer …" (what System One clients send).
func presentedKey(hd http.Header) string {
	if k := strings.TrimSpace(hd.Get("X-Api-Key")); k != "" {
		return k
	}
	a := strings.TrimSpace(hd.Get("Authorization"))
	if len(a) > 7 && strings.EqualFold(a[:7], "bearer ") {
		return strings.TrimSpace(a[7:])
	}
	return ""
}

// Authenticate names the caller of req the way Handle does (API key, then
// authorizer identity, then anonymous when allowed), or returns the 401
// answer. Servers that add their own routes (verdict up's result lookups)
// use it to protect them alike.
func (h *Handler) Authenticate(req *Request) (Caller, *Response) {
	if k := presentedKey(req.Header); k != "" {
		if tenant, ok := h.lookupKey(k); ok {
			return Caller{Tenant: tenant, APIKey: k, Identity: req.Identity}, nil
		}
		return Caller{}, unauthorized("invalid API key")
	}
	if req.Identity != "" && h.cfg.TrustAuthorizer {
		return Caller{Tenant: req.Identity, Identity: req.Identity}, nil
	}
	if h.cfg.AllowAnonymous {
		return Caller{}, nil
	}
	return Caller{}, unauthorized("an API key is required (X-Api-Key or Authorization: Bearer)")
}

func unauthorized(msg string) *Response {
	r := errorResponse(http.StatusUnauthorized, ErrorBody{Code: "unauthorized", Message: msg})
	r.Header.Set("WWW-Authenticate", `Bearer realm="verdict"`)
	return r
}
