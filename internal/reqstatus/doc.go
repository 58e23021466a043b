// Package reqstatus tells callers of `verdict up` what became of the
// requests its front door accepted. Log (requests.db) records each
// request once it is enqueued — its tenant, model and decision ids — so
// that its status survives restarts while its results are not stored
// yet; API answers GET /v1/requests/{id} and GET /v1/decisions/{id} from
// that log and the results store, showing a caller only its own tenant's
// requests; Routes is the whole HTTP surface of `verdict up`, every route
// authenticated by the front door's rules (package auth) except the
// health check.
package reqstatus
