//go:build chaos

package chaos

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

// Sizes of the HTTP checks.
const (
	badRequestsPerServer = 5000 // bad requests against each of serve and up
	badClients           = 4    // connections sending them at once
	badMaxBody           = 64 << 10
	// slowClients send their headers, then stall the body.
	slowClients = 20
	// slowLimit is how long a stalled body may hold a socket of `verdict
	// up`: its body read timeout (60 s, package listen's default) plus a
	// margin.
	slowLimit = 65 * time.Second
	// Overload: rounds of overloadClients requests at once against a
	// serve that scores one request at a time and queues two.
	overloadRounds  = 6
	overloadClients = 48
	// overloadGrowth is how much the resident memory may grow from the
	// second round to the last.
	overloadGrowth = 48 << 20
)

// rawRequest is one raw HTTP request of the corpus.
type rawRequest struct {
	raw []byte
	// cut: the client stops sending before the request is complete (it
	// half-closes the connection after raw, as a client that died would).
	cut bool
}

// rawExchange writes one request on a fresh connection (half-closing it
// when the request is cut) and reads the answer. It returns the status, or
// 0 when the server closed the connection without answering.
func rawExchange(addr string, req rawRequest) (int, error) {
	c, err := net.DialTimeout("tcp", addr, 5*time.Second)
	if err != nil {
		return 0, err
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(20 * time.Second))
	if _, err := c.Write(req.raw); err != nil {
		return 0, nil // the server may close early on a bad request
	}
	if req.cut {
		_ = c.(*net.TCPConn).CloseWrite()
	}
	resp, err := http.ReadResponse(bufio.NewReader(c), nil)
	if err != nil {
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			return 0, fmt.Errorf("no answer and no close within 20 s")
		}
		return 0, nil
	}
	_, _ = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, nil
}

// badCorpus makes n bad (or oddly valid) raw HTTP requests against the
// given routes, each with a valid body to start from.
func badCorpus(r *rand.Rand, n int, routes map[string]string) []rawRequest {
	paths := make([]string, 0, len(routes))
	for p := range routes {
		paths = append(paths, p)
	}
	contentTypes := []string{"application/json", "", "text/plain", "application/json; charset=utf-16", "application/xml",
		"multipart/form-data; boundary=x", "application/json\t", "*/*", "application/json, text/plain", "appl\x01ication/json"}
	oddHeaders := []string{
		"Content-Length: abc\r\n", "Content-Length: -1\r\n", "Content-Length: 99999999999999999999\r\n",
		"Content-Length: 5\r\nContent-Length: 6\r\n", "Transfer-Encoding: gzip\r\n", "Transfer-Encoding: chunked, identity\r\n",
		"Authorization: Bearer \xff\xfe\r\n", "Authorization: bearer\r\n", "X-Api-Key: " + strings.Repeat("k", 8<<10) + "\r\n",
		"Idempotency-Key: " + strings.Repeat("é", 4<<10) + "\r\n", "Idempotency-Key: \r\n", "No-Colon-Header\r\n",
		"X-Big: " + strings.Repeat("b", 2<<20) + "\r\n", " leading-space: x\r\n", "Expect: 100-continue\r\n",
		"Content-Encoding: gzip\r\n", "Host: \r\n", "X-Forwarded-For: ::::\r\n",
	}
	var out []rawRequest
	for len(out) < n {
		path := paths[r.IntN(len(paths))]
		body := []byte(routes[path])
		if len(body) == 0 {
			body = []byte(`{"id": "x"}`)
		}
		method, proto, ct := "POST", "HTTP/1.1", "application/json"
		extra := ""
		chunked, lengthDelta := false, 0
		switch kind := r.IntN(10); kind {
		case 0: // malformed JSON: truncated
			body = body[:r.IntN(len(body))]
		case 1: // malformed JSON: bytes changed
			for range 1 + r.IntN(4) {
				body[r.IntN(len(body))] = byte(r.IntN(256))
			}
		case 2: // garbage
			body = make([]byte, r.IntN(300))
			for i := range body {
				body[i] = byte(r.IntN(256))
			}
		case 3, 4: // wrong types and odd values
			body = wrongTypes(r, body)
		case 5: // huge bodies
			body = []byte(`{"state": "` + strings.Repeat("x", badMaxBody+r.IntN(badMaxBody)) + `"}`)
			chunked = r.IntN(2) == 0
		case 6: // bad headers
			ct = contentTypes[r.IntN(len(contentTypes))]
			extra = oddHeaders[r.IntN(len(oddHeaders))]
		case 7: // truncated bodies: fewer bytes than announced
			lengthDelta = 1 + r.IntN(500)
			body = body[:r.IntN(len(body))]
		case 8: // other methods, paths and protocols
			method = []string{"GET", "PUT", "DELETE", "PATCH", "OPTIONS", "HEAD", "BREW", "post"}[r.IntN(8)]
			if r.IntN(2) == 0 {
				path = []string{"/", "//", "/v1/requests/" + strings.Repeat("%ff", 50), "/v1/decisions/%00", "/../../etc/passwd",
					"/invocations?x=%zz", "/endpoints//invocations", "/v1/requests/req_" + strings.Repeat("0", 5000), "*"}[r.IntN(9)]
			}
			proto = []string{"HTTP/1.1", "HTTP/1.0", "HTTP/2.0", "HTTP/9.9", "HTTX/1.1"}[r.IntN(5)]
		case 9: // malformed chunked framing
			chunked = true
			extra = "X-Chunk-Odd: 1\r\n"
		}
		var b strings.Builder
		fmt.Fprintf(&b, "%s %s %s\r\nHost: 127.0.0.1\r\nConnection: close\r\n", method, path, proto)
		if ct != "" {
			fmt.Fprintf(&b, "Content-Type: %s\r\n", ct)
		}
		b.WriteString(extra)
		switch {
		case chunked && extra == "X-Chunk-Odd: 1\r\n":
			b.WriteString("Transfer-Encoding: chunked\r\n\r\n")
			fmt.Fprintf(&b, "%s\r\n%s", []string{"zz", "-5", "ffffffffffffffff", "3;x=y", ""}[r.IntN(5)], body)
		case chunked:
			b.WriteString("Transfer-Encoding: chunked\r\n\r\n")
			fmt.Fprintf(&b, "%x\r\n%s\r\n0\r\n\r\n", len(body), body)
		case strings.HasPrefix(extra, "Content-Length") || strings.HasPrefix(extra, "Transfer-Encoding"):
			b.WriteString("\r\n")
			b.Write(body)
		default:
			fmt.Fprintf(&b, "Content-Length: %d\r\n\r\n", len(body)+lengthDelta)
			b.Write(body)
		}
		out = append(out, rawRequest{raw: []byte(b.String()), cut: lengthDelta > 0 || extra == "X-Chunk-Odd: 1\r\n"})
	}
	return out
}

// oddValues replace a JSON value in wrongTypes.
var oddValues = []string{`null`, `true`, `12`, `-1`, `1.5`, `1e999`, `-0`, `"x"`, `""`, `[]`, `{}`, `[1, "a", null]`,
	`"\ud800"`, `{"id": {}}`, `"` + strings.Repeat("s", 20000) + `"`, strings.Repeat("[", 20000) + strings.Repeat("]", 20000),
	`9007199254740993`, `"\u0000"`}

// wrongTypes replaces one value of a JSON body with a value of another
// type (or an odd one).
func wrongTypes(r *rand.Rand, body []byte) []byte {
	var v any
	if json.Unmarshal(body, &v) != nil {
		return body
	}
	const mark = "\x00odd\x00"
	var paths [][]any
	var walk func(x any, path []any)
	walk = func(x any, path []any) {
		paths = append(paths, append([]any(nil), path...))
		switch x := x.(type) {
		case map[string]any:
			for k, c := range x {
				walk(c, append(path, k))
			}
		case []any:
			for i, c := range x {
				walk(c, append(path, i))
			}
		}
	}
	walk(v, nil)
	p := paths[r.IntN(len(paths))]
	if len(p) == 0 {
		return []byte(oddValues[r.IntN(len(oddValues))])
	}
	parent := v
	for _, k := range p[:len(p)-1] {
		switch k := k.(type) {
		case string:
			parent = parent.(map[string]any)[k]
		case int:
			parent = parent.([]any)[k]
		}
	}
	switch k := p[len(p)-1].(type) {
	case string:
		parent.(map[string]any)[k] = mark
	case int:
		parent.([]any)[k] = mark
	}
	out, err := json.Marshal(v)
	if err != nil {
		return body
	}
	return []byte(strings.Replace(string(out), `"\u0000odd\u0000"`, oddValues[r.IntN(len(oddValues))], 1))
}

// protocolRefusal are the 5xx answers net/http itself gives to requests
// it cannot parse as HTTP/1.x: 501 for an unknown transfer coding, 505 for
// a protocol version it does not speak. They are the protocol's answers
// to a bad request, not server failures.
var protocolRefusal = map[int]bool{http.StatusNotImplemented: true, http.StatusHTTPVersionNotSupported: true}

// storm sends the corpus with badClients connections at once and fails on
// any 5xx answer or a connection left hanging.
func storm(t *testing.T, addr string, corpus []rawRequest) map[int]int {
	t.Helper()
	var mu sync.Mutex
	statuses := map[int]int{}
	var failures []string
	next := make(chan rawRequest)
	var wg sync.WaitGroup
	for range badClients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for req := range next {
				status, err := rawExchange(addr, req)
				mu.Lock()
				statuses[status]++
				if err != nil || (status >= 500 && !protocolRefusal[status]) {
					failures = append(failures, fmt.Sprintf("%d %v: %.300q", status, err, req.raw))
				}
				mu.Unlock()
			}
		}()
	}
	for _, req := range corpus {
		next <- req
	}
	close(next)
	wg.Wait()
	require.Empty(t, failures, "answers of 5xx or no answer at all (%d)", len(failures))
	return statuses
}

// TestBadRequestsNeverCrash protects the HTTP servers from their clients:
// thousands of malformed JSON bodies, wrongly typed fields, huge bodies,
// bad headers, truncated bodies, odd methods, paths and protocols never
// crash `verdict serve` or `verdict up`, never get a 5xx, and the server
// answers a valid request afterwards.
func TestBadRequestsNeverCrash(t *testing.T) {
	r := seeded(t)
	semif := `{"decision": {"id": "a", "state": "The card was charged twice.", "question": "Is this billing?", "options": [{"id": "yes", "description": "Yes."}, {"id": "no", "description": "No."}]}}`
	batch := semifBatch("bad", 1, 1)
	systemOne := `{"model": "jev-latest", "state": {"ticket": "Charged twice."}, "questions": {"refund": {"type": "noul", "instructions": "Money back?"}, "queue": {"type": "choice", "instructions": "Which queue?", "criteria": {"billing": "Payments.", "tech": null}}, "urgency": {"type": "score", "instructions": "How urgent?", "criteria": ["low", "high"]}}}`
	maxBody := fmt.Sprint(badMaxBody)

	t.Run("serve", func(t *testing.T) {
		p, url := startServe(t, "--max-body-bytes", maxBody)
		routes := map[string]string{"/invocations": semif, "/endpoints/x/invocations": batch, "/v1/systemone": systemOne,
			"/v1/models": "", "/ping": ""}
		statuses := storm(t, strings.TrimPrefix(url, "http://"), badCorpus(r, badRequestsPerServer, routes))
		t.Logf("statuses (0 = closed without an answer): %v", statuses)
		require.False(t, p.exited(), "verdict serve is still running")
		status, _, body, err := post(context.Background(), http.DefaultClient, url+"/invocations", semif, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusOK, status, string(body))
		require.NotContains(t, p.Output(), "panic")
		_, err = p.terminate(t, time.Minute)
		require.NoError(t, err)
	})
	t.Run("up", func(t *testing.T) {
		p, url := startUp(t, "127.0.0.1:0", t.TempDir(), "--max-body-bytes", maxBody)
		routes := map[string]string{"/v1/decisions": batch, "/v1/systemone/async": systemOne, "/v1/requests/req_x": "",
			"/v1/decisions/a?request_id=x": "", "/admin/policy": "{}", "/v1/status": "", "/metrics": "", "/healthz": ""}
		statuses := storm(t, strings.TrimPrefix(url, "http://"), badCorpus(r, badRequestsPerServer, routes))
		t.Logf("statuses (0 = closed without an answer): %v", statuses)
		require.False(t, p.exited(), "verdict up is still running")
		status, _, body, err := post(context.Background(), http.DefaultClient, url+"/v1/decisions", semif, nil)
		require.NoError(t, err)
		require.Equal(t, http.StatusAccepted, status, string(body))
		require.NotContains(t, p.Output(), "panic")
		_, err = p.terminate(t, time.Minute)
		require.NoError(t, err)
	})
}

// TestSlowlorisUp protects `verdict up` from slow clients: connections
// that send their headers and then stall the body are answered 408 or
// closed within the body read timeout, and meanwhile other callers are
// served. Needs the listener timeouts of issue 15.
func TestSlowlorisUp(t *testing.T) {
	p, url := startUp(t, "127.0.0.1:0", t.TempDir())
	addr := strings.TrimPrefix(url, "http://")
	type outcome struct {
		status int
		after  time.Duration
		err    error
	}
	results := make(chan outcome, slowClients)
	begin := time.Now()
	for range slowClients {
		go func() {
			c, err := net.Dial("tcp", addr)
			if err != nil {
				results <- outcome{err: err}
				return
			}
			defer c.Close()
			_, err = io.WriteString(c, "POST /v1/decisions HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n{\"state\": ")
			if err != nil {
				results <- outcome{err: err}
				return
			}
			_ = c.SetReadDeadline(time.Now().Add(slowLimit))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			o := outcome{after: time.Since(begin)}
			var ne net.Error
			switch {
			case err == nil:
				o.status = resp.StatusCode
				resp.Body.Close()
			case errors.As(err, &ne) && ne.Timeout():
				o.err = fmt.Errorf("neither answered nor closed within %v", slowLimit)
			}
			results <- o
		}()
	}
	// While they stall, others are served.
	status, _, body, err := post(context.Background(), &http.Client{Timeout: 10 * time.Second}, url+"/v1/decisions", semifBatch("slow", 1, 1), nil)
	require.NoError(t, err)
	require.Equal(t, http.StatusAccepted, status, string(body))

	statuses := map[int]int{}
	var longest time.Duration
	for range slowClients {
		o := <-results
		require.NoError(t, o.err)
		if o.status != 0 {
			require.Equal(t, http.StatusRequestTimeout, o.status, "a stalled body is answered 408 (or the connection closed)")
		}
		statuses[o.status]++
		longest = max(longest, o.after)
	}
	t.Logf("stalled connections: %v (0 = closed), the last after %v", statuses, longest.Round(100*time.Millisecond))
	require.False(t, p.exited())
	_, err = p.terminate(t, time.Minute)
	require.NoError(t, err)
}

// TestOverloadAnswers503WithBoundedMemory protects `verdict serve` under
// overload: beyond --max-concurrent and --max-queue, requests are answered
// 503 with Retry-After at once (never 5xx otherwise, never hanging), and
// the resident memory stays flat over rounds of overload.
func TestOverloadAnswers503WithBoundedMemory(t *testing.T) {
	p, url := startServe(t, "--max-concurrent", "1", "--max-queue", "2")
	var decisions []string
	for i := range 16 {
		decisions = append(decisions, fmt.Sprintf(`{"id": "d%d", "state": %q, "question": "Which queue, %d?", "options": [{"id": "a", "description": "A."}, {"id": "b", "description": "B."}, {"id": "c", "description": "C."}]}`,
			i, ticketState("overload", 1, 6), i))
	}
	body := `{"decisions": [` + strings.Join(decisions, ",") + `]}`
	c := &http.Client{Timeout: time.Minute, Transport: &http.Transport{MaxIdleConnsPerHost: overloadClients}}
	var rss []int64
	total := map[int]int{}
	for round := range overloadRounds {
		var mu sync.Mutex
		statuses := map[int]int{}
		var failures []string
		var wg sync.WaitGroup
		for range overloadClients {
			wg.Add(1)
			go func() {
				defer wg.Done()
				status, hdr, b, err := post(context.Background(), c, url+"/invocations", body, nil)
				mu.Lock()
				defer mu.Unlock()
				statuses[status]++
				switch {
				case err != nil:
					failures = append(failures, err.Error())
				case status == http.StatusServiceUnavailable && hdr.Get("Retry-After") == "":
					failures = append(failures, "503 without Retry-After")
				case status != http.StatusOK && status != http.StatusServiceUnavailable:
					failures = append(failures, fmt.Sprintf("%d: %.200s", status, b))
				}
			}()
		}
		wg.Wait()
		require.Empty(t, failures, "round %d", round+1)
		for s, n := range statuses {
			total[s] += n
		}
		rss = append(rss, p.rssBytes(t))
		t.Logf("round %d: %v, RSS %d MiB", round+1, statuses, rss[round]>>20)
	}
	require.Positive(t, total[http.StatusServiceUnavailable], "overload was answered 503")
	require.Positive(t, total[http.StatusOK], "admitted requests were answered")
	require.LessOrEqual(t, rss[len(rss)-1]-rss[1], int64(overloadGrowth), "resident memory grows under repeated overload: %v", rss)
	_, err := p.terminate(t, time.Minute)
	require.NoError(t, err)
}
