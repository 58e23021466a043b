package lambda

import (
	"github.com/verdict-dev/verdict/internal/auth"
)

// Authenticate names the caller of req by the rules of package auth (API
// key, then the authorizer identity when Config.TrustAuthorizer, then
// anonymous when Config.AllowAnonymous), or returns the 401 answer.
// Servers that add their own routes (verdict up's result lookups, its
// metrics and policy admin) use it to protect them alike.
func (h *Handler) Authenticate(req *Request) (Caller, *Response) {
	identity := ""
	if h.cfg.TrustAuthorizer {
		identity = req.Identity
	}
	c, err := h.auth.Check(req.Header, identity)
	if err != nil {
		return Caller{}, Unauthorized(err)
	}
	return Caller{Tenant: c.Tenant, APIKey: c.Key, Identity: req.Identity, Review: c.Review}, nil
}

// Unauthorized is the 401 answer to an auth refusal, in the front door's
// error shape.
func Unauthorized(err error) *Response {
	r := errorResponse(ErrorBody{Code: auth.Code, Message: auth.Message(err)})
	r.Header.Set("WWW-Authenticate", auth.Challenge)
	return r
}
