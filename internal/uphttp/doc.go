// Package uphttp is the HTTP surface of `verdict up`: Routes puts the
// front door (submissions and the result lookups of package results),
// the metrics, the pools' status and the policy admin on one mux, every
// route authenticated by the front door's rules (package auth) except
// the health check and the review page's static files (/review,
// /review.js, /review.css), which hold no data.
package uphttp
