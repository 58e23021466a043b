// Package server is verdict's synchronous HTTP front: the SageMaker
// container contract and the System One API, in one http.Handler.
//
// A request flows through four steps, each of which can end it with a JSON
// error {"message", "code", "fields", "request_id"}:
//
//  1. routing and authentication: the path picks a route; a wrong method
//     answers 405, an unknown path 404; when API keys are configured every
//     route but /ping needs a key, "Authorization: Bearer <key>" or
//     "X-Api-Key: <key>", checked by package auth's rules (401 otherwise);
//  2. reading and parsing: the body is read up to Config.MaxBodyBytes
//     (413 beyond; 408 when it arrives slower than Config.Timeout), its
//     content type must be JSON (415), and it is parsed
//     with the decision package — SemIf (bare, {"decision": …} or
//     {"decisions": […]}) or System One (detected by a top-level
//     "questions" object): 400 for malformed JSON, 422 with a list of
//     field errors for valid JSON that breaks a rule;
//  3. admission: at most Config.MaxConcurrent requests score at once and
//     at most Config.MaxQueue more wait; beyond that the request is shed
//     at once with 503 and Retry-After — checked before step 2 reads the
//     body, so memory stays flat under any load. engine.ErrBusy from the scorer is answered the same way;
//  4. scoring and rendering: an optional Policy plans each decision, the
//     Scorer scores them in one call (decisions of a request share their
//     state), and the answer is rendered in the shape the request came in.
//
// Routes:
//
//	GET  /ping                          200 when the model is loaded, 503 while loading
//	POST /invocations                   SemIf or System One (SageMaker container contract)
//	POST /endpoints/{name}/invocations  the same (SageMaker runtime path, for --endpoint-url)
//	POST /v1/systemone                  System One only; x-typesafe-request-id header
//	GET  /v1/models                     the model that answers, and the accepted aliases
//	GET  /metrics                       Prometheus metrics
//
// A Server with no Scorer is "loading": /ping answers 503 and scoring
// routes 503 with Retry-After until SetScorer is called, so a process can
// listen first and load its model in the background.
package server
