// Package auth is the one rulebook for API keys, shared by every listener
// verdict opens: the Lambda front door, `verdict up` and `verdict serve`.
//
// A request presents a key in either of two headers:
//
//	Authorization: Bearer KEY   (any case of "Bearer"; what System One clients send)
//	X-Api-Key: KEY              (what API Gateway usage plans and curl users send)
//
// Both may be sent when they carry the same key; two different keys are
// refused (ErrTwoKeys) rather than one silently preferred. An Authorization
// header with another scheme (Basic, an AWS signature) is not a key and is
// ignored.
//
// Keys are kept as their SHA-256 digests. A presented key is hashed and its
// digest compared, in constant time, with every configured digest, without
// stopping at a match: neither a key's length nor its position in the list
// shows in the time a check takes.
//
// An Authenticator decides a caller in this order:
//
//  1. a presented key, when keys are configured: it must match one (else
//     ErrBadKey), and names the caller's tenant;
//  2. an identity the platform established (API Gateway's authorizer),
//     when the entry point trusts one: it is the tenant;
//  3. anonymous, when the listener accepts anonymous callers (no keys
//     configured on loopback, or an explicit --no-auth): tenant "";
//  4. otherwise ErrNoKey (or ErrBadKey when a key was presented that no
//     configured key can match).
//
// With no keys configured and anonymous callers accepted, authentication is
// off: a presented key is not checked (clients that always send one keep
// working).
//
// Health checks are the only routes open without a key (Open): /ping (the
// SageMaker contract) and /healthz. Everything else, /metrics and
// /admin/policy included, needs a key whenever keys are configured.
//
// A refusal is answered 401 with WWW-Authenticate: Challenge and a body
// whose "code" is Code and whose "message" is Message(err), in each entry
// point's error shape.
//
// CheckBind is the one loopback rule: a listener reachable from other hosts
// needs keys (or an explicit opt-out).
package auth
