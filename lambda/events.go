package lambda

import (
	"context"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/aws/aws-lambda-go/events"

	"github.com/verdict-dev/verdict/decision"
)

// HandleHTTPAPI is the Lambda handler for API Gateway HTTP API events
// (payload format 2.0). Function URL events have the same shape, so the
// one handler serves both event sources. It returns an error only for an
// event it cannot read at all; every HTTP problem is a response.
func (h *Handler) HandleHTTPAPI(ctx context.Context, ev events.APIGatewayV2HTTPRequest) (events.APIGatewayV2HTTPResponse, error) {
	path := ev.RawPath
	// A named stage (not $default) prefixes the raw path: /prod/v1/decisions.
	if st := ev.RequestContext.Stage; st != "" && st != "$default" && strings.HasPrefix(path, "/"+st+"/") {
		path = path[len(st)+1:]
	}
	req, r := fromEvent(ev.RequestContext.HTTP.Method, path, ev.RawQueryString, ev.Headers, ev.Body, ev.IsBase64Encoded)
	if r == nil {
		req.Identity = httpAPIIdentity(ev.RequestContext.Authorizer)
		req.PlatformRequestID = ev.RequestContext.RequestID
		r = h.Handle(ctx, req)
	}
	return events.APIGatewayV2HTTPResponse{StatusCode: r.Status, Headers: flatHeaders(r.Header), Body: string(r.Body)}, nil
}

// HandleFunctionURL is the Lambda handler for Function URL events.
func (h *Handler) HandleFunctionURL(ctx context.Context, ev events.LambdaFunctionURLRequest) (events.LambdaFunctionURLResponse, error) {
	req, r := fromEvent(ev.RequestContext.HTTP.Method, ev.RawPath, ev.RawQueryString, ev.Headers, ev.Body, ev.IsBase64Encoded)
	if r == nil {
		if a := ev.RequestContext.Authorizer; a != nil && a.IAM != nil {
			req.Identity = firstNonEmpty(a.IAM.UserARN, a.IAM.CallerID)
		}
		req.PlatformRequestID = ev.RequestContext.RequestID
		r = h.Handle(ctx, req)
	}
	return events.LambdaFunctionURLResponse{StatusCode: r.Status, Headers: flatHeaders(r.Header), Body: string(r.Body)}, nil
}

func fromEvent(method, path, rawQuery string, headers map[string]string, body string, b64 bool) (*Request, *Response) {
	query, _ := url.ParseQuery(rawQuery) // what parses is kept, as net/http does
	req := &Request{Method: strings.ToUpper(method), Path: path, Query: query, Header: http.Header{}}
	for k, v := range headers {
		req.Header.Set(k, v)
	}
	if b64 {
		b, err := base64.StdEncoding.DecodeString(body)
		if err != nil {
			return nil, errorResponse(ErrorBody{Code: decision.CodeMalformed, Message: "body is marked base64 but does not decode"})
		}
		req.Body = b
	} else {
		req.Body = []byte(body)
	}
	return req, nil
}

// httpAPIIdentity picks the caller identity an authorizer established: a
// Lambda authorizer's "tenant" context value, a JWT's "tenant" or "sub"
// claim, or the IAM caller's ARN.
func httpAPIIdentity(a *events.APIGatewayV2HTTPRequestContextAuthorizerDescription) string {
	if a == nil {
		return ""
	}
	if t, ok := a.Lambda["tenant"]; ok {
		if s := strings.TrimSpace(fmt.Sprint(t)); s != "" && t != nil {
			return s
		}
	}
	if a.JWT != nil {
		if s := firstNonEmpty(a.JWT.Claims["tenant"], a.JWT.Claims["sub"]); s != "" {
			return s
		}
	}
	if a.IAM != nil {
		return firstNonEmpty(a.IAM.UserARN, a.IAM.CallerID)
	}
	return ""
}

func firstNonEmpty(ss ...string) string {
	for _, s := range ss {
		if s = strings.TrimSpace(s); s != "" {
			return s
		}
	}
	return ""
}

func flatHeaders(h http.Header) map[string]string {
	out := make(map[string]string, len(h))
	for k, v := range h {
		out[k] = strings.Join(v, ", ")
	}
	return out
}
