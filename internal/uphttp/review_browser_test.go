package uphttp

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	cdplog "github.com/chromedp/cdproto/log"
	"github.com/chromedp/cdproto/runtime"
	"github.com/chromedp/chromedp"
	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/listen"
	"github.com/verdict-dev/verdict/internal/results"
	"github.com/verdict-dev/verdict/internal/sink"
)

// The keys of the browser test: one granted review, one not.
const (
	reviewerKey = "rev-key-0123456789"
	plainKey    = "plain-key-0123456789"
)

// chromiumPath finds Debian's chromium (make test-deps installs it), or the
// browser VERDICT_CHROMIUM names; the test skips when there is none.
func chromiumPath(t *testing.T) string {
	t.Helper()
	if p := os.Getenv("VERDICT_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome", "headless-shell"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	t.Skip("chromium is not installed, so the review page's browser test cannot run: `make test-deps` installs Debian's chromium (or set VERDICT_CHROMIUM to a Chrome/Chromium binary)")
	return ""
}

// seedReviews stores one request of three decisions that the policy sent
// to review, as the front door and a worker would, and returns its id.
// Two states carry markup that must never run.
func seedReviews(t *testing.T, store *results.Local) string {
	t.Helper()
	ctx := context.Background()
	const reqID = "req_5eed0000000000000000000000000001"
	states := map[string]string{
		"d1": `<script>window.pwned=1</script> Customer asks for a refund of order 1182.`,
		"d2": `Invoice 77 was paid twice.`,
		"d3": `<img src=x onerror="window.pwned=2"> The parcel arrived broken.`,
	}
	acc := results.Accepted{RequestID: reqID, Tenant: "acme", Model: "m", AcceptedAt: time.Now().UTC()}
	for _, id := range []string{"d1", "d2", "d3"} {
		acc.Decisions = append(acc.Decisions, results.AcceptedDecision{ID: id, Route: string(decision.RouteCPU)})
	}
	require.NoError(t, store.Accept(ctx, acc))
	for _, id := range []string{"d1", "d2", "d3"} {
		in := &decision.Decision{ID: id, Kind: "support", State: decision.TextState(states[id]), Question: "Which team handles " + id + "?",
			Options: []decision.Option{{ID: "billing", Description: "Payments, refunds, invoices."}, {ID: "shipping", Description: "Parcels and delivery."}}}
		rec := sink.Record{RequestID: reqID, DecisionID: id, Tenant: "acme", Format: "semif", Model: "m", SubmittedAt: acc.AcceptedAt,
			Status: decision.StatusReview, Input: in,
			Result: decision.Result{ID: id, Kind: "support", OptionIDs: []string{"billing", "shipping"}, Probabilities: []float64{0.55, 0.45},
				Outcome: &decision.Outcome{Status: decision.StatusReview, Step: "threshold", Reason: "margin 0.10 < min_margin 0.30"}}}
		require.NoError(t, store.Publish(ctx, []sink.Record{rec}))
	}
	return reqID
}

// TestReviewPageInBrowser drives the review page in headless chromium over
// the real stack of `verdict up` (front door, local queue, results store,
// the listener): the reviewer enters a key, sees the inbox with hostile
// states shown as text, answers one review by a click and one by a
// keyboard shortcut, and the answers are stored as labels with source
// "review".
func TestReviewPageInBrowser(t *testing.T) {
	if testing.Short() {
		t.Skip("drives a browser; not in -short")
	}
	bin := chromiumPath(t)
	t.Parallel()

	rig := newUpRig(t, map[string]string{reviewerKey: "acme:review", plainKey: "acme"})
	reqID := seedReviews(t, rig.store)
	base := "http://" + serveUp(t, rig, listen.Config{})
	b := newBrowser(t, bin)

	// The page opens without a key and asks for one. Pages of two reviews
	// (?limit=2) let the test load the next page with "More".
	page := base + ReviewPath + "?limit=2"
	b.do(chromedp.Navigate(page), chromedp.WaitVisible(chromedp.ID("api-key")))
	inputType := run(b, chromedp.AttributeValue(chromedp.ID("api-key"), "type"))
	require.Equal(t, "password", inputType.Value)
	require.Contains(t, run(b, chromedp.Text(chromedp.CSS(`label[for="api-key"]`))), "API key")

	// A key without the review grant is refused: the prompt says why.
	b.do(chromedp.SendKeys(chromedp.ID("api-key"), plainKey), chromedp.Click(chromedp.ID("open-inbox")))
	b.wait("the refusal of a key without the grant", `!document.getElementById('key-error').hidden`)
	require.Contains(t, run(b, chromedp.Text(chromedp.ID("key-error"))), "(request_id req_", "the refusal quotes its request id")

	// The reviewer's key opens the inbox, oldest first; "More" loads the
	// next page.
	b.do(chromedp.SendKeys(chromedp.ID("api-key"), reviewerKey), chromedp.Click(chromedp.ID("open-inbox")))
	b.wait("the first page", `document.querySelectorAll('#cards > .card').length === 2 && !document.getElementById('more').hidden`)
	require.Equal(t, []string{"d1", "d2"}, b.cards())
	b.do(chromedp.Click(chromedp.ID("more")))
	b.wait("the second page", `document.querySelectorAll('#cards > .card').length === 3`)
	require.Equal(t, []string{"d1", "d2", "d3"}, b.cards())
	require.True(t, run(b, chromedp.Evaluate[bool](`document.getElementById('more').hidden`)), "no more after the last page")

	states := run(b, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#cards .state')).map(e => e.textContent)`))
	require.Equal(t, `<script>window.pwned=1</script> Customer asks for a refund of order 1182.`, states[0], "the state shows literally")
	require.Equal(t, `<img src=x onerror="window.pwned=2"> The parcel arrived broken.`, states[2])
	require.Zero(t, run(b, chromedp.Evaluate[int](`document.querySelectorAll('#cards script, #cards img').length`)), "no element was made from a state")
	require.Equal(t, "undefined", run(b, chromedp.Evaluate[string](`typeof window.pwned`)), "no script from a state ran")
	require.Empty(t, run(b, chromedp.Evaluate[string](`document.cookie`)))
	require.Equal(t, page, run(b, chromedp.Location()), "the key never reaches the URL")

	// Each option is a button with its id, description and a bar as wide
	// as its probability; the policy's reason and the shortcuts are shown.
	type optionView struct{ Tag, Text, Width, Pct string }
	option := run(b, chromedp.Evaluate[optionView](`(() => { const b = document.querySelector('#cards .card button.option');
		return {Tag: b.tagName, Text: b.textContent, Width: b.querySelector('.fill').style.width, Pct: b.querySelector('.pct').textContent}; })()`))
	require.Equal(t, "BUTTON", option.Tag)
	require.Contains(t, option.Text, "billing")
	require.Contains(t, option.Text, "Payments, refunds, invoices.")
	require.Equal(t, "55%", option.Width)
	require.Equal(t, "55.0%", option.Pct)
	require.Contains(t, run(b, chromedp.Text(chromedp.CSS(`#cards .card .reason`))), "margin 0.10 < min_margin 0.30")
	require.Contains(t, run(b, chromedp.Text(chromedp.ID("shortcuts"))), "1–9")
	b.shot("review-inbox.png")

	// One click answers d1 with "shipping".
	b.do(chromedp.Click(chromedp.CSS(`#cards .card[data-decision-id="d1"] button.option[data-option="shipping"]`)))
	b.wait("d1 to leave the list", `!document.querySelector('#cards .card[data-decision-id="d1"]')`)

	// Key 1 answers the focused card, d3 (not the first), with its first
	// option, "billing".
	b.do(chromedp.Focus(chromedp.CSS(`#cards .card[data-decision-id="d3"]`)), chromedp.KeyEvent("1"))
	b.wait("d3 to leave the list", `!document.querySelector('#cards .card[data-decision-id="d3"]')`)
	require.Equal(t, []string{"d2"}, b.cards(), "the unanswered review stays")
	require.Zero(t, run(b, chromedp.Evaluate[int](`document.querySelectorAll('#cards .error:not([hidden])').length`)), "page says: %q", b.says())
	b.shot("review-answered.png")

	// The answers are the decisions' labels, with source "review".
	ctx := context.Background()
	for id, want := range map[string]string{"d1": "shipping", "d3": "billing"} {
		labels, err := rig.store.Labels(ctx, reqID, id)
		require.NoError(t, err)
		require.Len(t, labels, 1, id)
		require.Equal(t, want, labels[0].Option, id)
		require.Equal(t, "review", labels[0].Source, id)
		require.Equal(t, "acme", labels[0].Tenant, id)
	}
	labels, err := rig.store.Labels(ctx, reqID, "d2")
	require.NoError(t, err)
	require.Empty(t, labels, "d2 was not answered")
	open, _, err := rig.store.Reviews(ctx, "acme", "", 10)
	require.NoError(t, err)
	require.Len(t, open, 1, "the answered reviews left the inbox")

	require.Empty(t, b.problems(), "the page ran without script errors or CSP violations")
}

// browser is a headless chromium tab of one test, with the script errors
// and CSP violations it reported.
type browser struct {
	t   *testing.T
	ctx context.Context
	dir string // where screenshots go
	mu  sync.Mutex
	bad []string
}

func newBrowser(t *testing.T, bin string) *browser {
	t.Helper()
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(bin),
		chromedp.WindowSize(1100, 900),
		chromedp.Flag("disable-dev-shm-usage", true),
	)
	if os.Geteuid() == 0 {
		opts = append(opts, chromedp.NoSandbox) // chromium refuses to run as root with its sandbox
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx, chromedp.WithLogf(t.Logf))
	ctx, cancelTime := context.WithTimeout(ctx, 2*time.Minute)
	t.Cleanup(func() { cancelTime(); cancelTab(); cancelAlloc() })
	b := &browser{t: t, ctx: ctx, dir: t.TempDir()}
	err := chromedp.Listen(ctx, func(ev any) {
		var msg string
		switch ev := ev.(type) {
		case *runtime.EventExceptionThrown:
			msg = "exception: " + ev.ExceptionDetails.Text
			if ev.ExceptionDetails.Exception != nil {
				msg += " " + ev.ExceptionDetails.Exception.Description
			}
		case *cdplog.EventEntryAdded:
			// A CSP violation is a log entry of the security source.
			if ev.Entry.Source == cdplog.EntrySourceSecurity || ev.Entry.Source == cdplog.EntrySourceViolation {
				msg = string(ev.Entry.Source) + ": " + ev.Entry.Text
			}
		}
		if msg != "" {
			b.mu.Lock()
			b.bad = append(b.bad, msg)
			b.mu.Unlock()
		}
	})
	require.NoError(t, err, "start chromium (%s)", bin)
	return b
}

// run runs one action that returns a value, or fails the test.
func run[T any](b *browser, a chromedp.Action[T]) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, a)
	require.NoError(b.t, err, "the page says: %q", b.says())
	return v
}

// do runs actions that return nothing, or fails the test.
func (b *browser) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	require.NoError(b.t, chromedp.Do(b.ctx, steps...), "the page says: %q", b.says())
}

// wait polls a page expression until it is true; on a timeout it fails
// with what the page says and a screenshot.
func (b *browser) wait(what, expr string) {
	b.t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[chromedp.Void](expr, chromedp.WithPollingTimeout(30*time.Second))); err != nil {
		b.shot("review-failure.png")
		require.NoError(b.t, err, "waiting for %s; the page says: %q", what, b.says())
	}
}

// shot writes a full-page screenshot to the test's temp dir, and to
// VERDICT_SCREENSHOT_DIR when it is set.
func (b *browser) shot(name string) {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100)) // 100: PNG; less is JPEG
	if err != nil {
		b.t.Logf("screenshot %s: %v", name, err)
		return
	}
	dirs := []string{b.dir}
	if dir := os.Getenv("VERDICT_SCREENSHOT_DIR"); dir != "" {
		require.NoError(b.t, os.MkdirAll(dir, 0o755))
		dirs = append(dirs, dir)
	}
	for _, dir := range dirs {
		p := filepath.Join(dir, name)
		require.NoError(b.t, os.WriteFile(p, png, 0o644))
		b.t.Logf("screenshot: %s", p)
	}
}

func (b *browser) problems() []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]string(nil), b.bad...)
}

// cards lists the decision ids of the cards on the page, in order.
func (b *browser) cards() []string {
	ids, err := chromedp.Run(b.ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll('#cards > .card')).map(c => c.dataset.decisionId)`))
	if err != nil {
		return []string{fmt.Sprint("error: ", err)}
	}
	return ids
}

// says is the page's status lines and errors, for failure messages.
func (b *browser) says() string {
	ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
	defer cancel()
	s, _ := chromedp.Run(ctx, chromedp.Evaluate[string](`['key-error', 'status'].map(id => document.getElementById(id).textContent)
		.concat(Array.from(document.querySelectorAll('.card .error')).map(e => e.textContent)).filter(Boolean).join(' | ')`))
	return strings.TrimSpace(s)
}
