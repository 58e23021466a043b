//go:build chaos

package chaos

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/queue"
	"github.com/verdict-dev/verdict/internal/results"
	"github.com/verdict-dev/verdict/internal/sink"
	"github.com/verdict-dev/verdict/router"
)

// The log lines the suite waits for (their "msg"). Scripts read the first
// two as well.
const (
	msgUpListening    = "verdict up: listening"
	msgUpStopped      = "verdict up: stopped"
	msgServeListening = "listening"
	msgModelLoaded    = "model loaded"
	msgWorkerStarted  = "worker started"
)

// startTimeout bounds how long a process may take to start listening or
// to load the tiny model.
const startTimeout = 90 * time.Second

// shutdownMargin is what a process may take beyond its own shutdown
// deadline (--drain-timeout, --shutdown-timeout) to exit: closing the
// engine and the stores, and the scheduler of a shared 2-core machine.
const shutdownMargin = 2 * time.Second

var (
	// verdictBin is the verdict binary TestMain built.
	verdictBin string
	// tinyModel is a tiny synthetic model (seed 1) TestMain wrote.
	tinyModel string
)

// TestMain builds the verdict binary once (against the pinned llama.cpp,
// with the cgo settings of the environment when make sets them;
// VERDICT_CHAOS_BIN names a prebuilt one instead), writes the tiny
// synthetic model, runs the checks and removes both.
func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "verdict-chaos")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	code := func() int {
		verdictBin = os.Getenv("VERDICT_CHAOS_BIN")
		if verdictBin == "" {
			verdictBin = filepath.Join(dir, "verdict")
			if out, err := exec.Command("go", "build", "-o", verdictBin, "../../cmd/verdict").CombinedOutput(); err != nil {
				fmt.Fprintf(os.Stderr, "go build ../../cmd/verdict: %v\n%s", err, out)
				return 1
			}
		}
		tinyModel = filepath.Join(dir, "tiny.gguf")
		if out, err := exec.Command(verdictBin, "model", "synth", "--shape", "tiny", "--seed", "1", "-o", tinyModel).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "verdict model synth: %v\n%s", err, out)
			return 1
		}
		return m.Run()
	}()
	os.RemoveAll(dir)
	os.Exit(code)
}

// seeded returns a random source for one check and logs its seed;
// VERDICT_CHAOS_SEED replays a run.
func seeded(t *testing.T) *rand.Rand {
	t.Helper()
	seed := uint64(time.Now().UnixNano())
	if s := os.Getenv("VERDICT_CHAOS_SEED"); s != "" {
		v, err := strconv.ParseUint(s, 10, 64)
		require.NoError(t, err, "VERDICT_CHAOS_SEED")
		seed = v
	}
	t.Logf("seed %d (VERDICT_CHAOS_SEED=%d replays it)", seed, seed)
	return rand.New(rand.NewPCG(seed, seed>>1|1))
}

// between returns a random duration in [lo, hi).
func between(r *rand.Rand, lo, hi time.Duration) time.Duration {
	return lo + time.Duration(r.Int64N(int64(hi-lo)))
}

// proc is one verdict child process. Its output (stdout and stderr) is
// kept; JSON log lines are parsed as they come.
type proc struct {
	name string
	cmd  *exec.Cmd
	mu   sync.Mutex
	out  bytes.Buffer
	recs []map[string]any
	done chan struct{}
	err  error // of Wait, once done is closed
	// killed is set once the test killed the process.
	killed bool
}

// start starts verdict with args and extra environment. The process is
// killed, if still running, when the test ends, and its output is logged
// when the test failed.
func start(t *testing.T, env []string, args ...string) *proc {
	t.Helper()
	p := &proc{name: args[0], done: make(chan struct{})}
	p.cmd = exec.Command(verdictBin, args...)
	p.cmd.Env = append(os.Environ(), env...)
	pr, pw := io.Pipe()
	p.cmd.Stdout, p.cmd.Stderr = pw, pw
	require.NoError(t, p.cmd.Start())
	go func() {
		sc := bufio.NewScanner(pr)
		sc.Buffer(make([]byte, 1<<20), 4<<20)
		for sc.Scan() {
			var rec map[string]any
			_ = json.Unmarshal(sc.Bytes(), &rec)
			p.mu.Lock()
			p.out.Write(sc.Bytes())
			p.out.WriteByte('\n')
			if rec != nil {
				p.recs = append(p.recs, rec)
			}
			p.mu.Unlock()
		}
		_, _ = io.Copy(io.Discard, pr)
	}()
	go func() {
		err := p.cmd.Wait()
		pw.Close()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(p.done)
	}()
	t.Cleanup(func() {
		p.mu.Lock()
		keep := 64 << 10
		if p.killed {
			keep = 2 << 10 // killed on purpose: its tail is enough
		}
		p.mu.Unlock()
		p.kill()
		if t.Failed() {
			out := p.Output()
			if len(out) > keep {
				out = "…" + out[len(out)-keep:]
			}
			t.Logf("verdict %s output:\n%s", p.name, out)
		}
	})
	return p
}

// Output is everything the process wrote so far.
func (p *proc) Output() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.out.String()
}

// exited reports whether the process has exited.
func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// waitErr is the exit error after the process exited.
func (p *proc) waitErr() error {
	<-p.done
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.err
}

// waitLog waits for the first JSON log line whose "msg" is msg and returns
// it; it fails the test when the process exits first or timeout passes.
func (p *proc) waitLog(t *testing.T, msg string, timeout time.Duration) map[string]any {
	t.Helper()
	deadline := time.Now().Add(timeout)
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	for {
		p.mu.Lock()
		for _, r := range p.recs {
			if r["msg"] == msg {
				p.mu.Unlock()
				return r
			}
		}
		p.mu.Unlock()
		select {
		case <-p.done:
			// The line may have been the last one read.
			time.Sleep(50 * time.Millisecond)
			p.mu.Lock()
			for _, r := range p.recs {
				if r["msg"] == msg {
					p.mu.Unlock()
					return r
				}
			}
			p.mu.Unlock()
			t.Fatalf("verdict %s exited (%v) before logging %q", p.name, p.waitErr(), msg)
		case <-tick.C:
			if time.Now().After(deadline) {
				t.Fatalf("verdict %s logged no %q within %v", p.name, msg, timeout)
			}
		}
	}
}

// maxNumber is the largest number field of the JSON log lines with
// message msg (0 when none).
func (p *proc) maxNumber(msg, field string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	most := 0
	for _, r := range p.recs {
		if v, ok := r[field].(float64); ok && r["msg"] == msg {
			most = max(most, int(v))
		}
	}
	return most
}

// kill sends SIGKILL (if the process still runs) and waits for the exit.
func (p *proc) kill() {
	p.mu.Lock()
	p.killed = true
	p.mu.Unlock()
	if !p.exited() {
		_ = p.cmd.Process.Kill()
	}
	<-p.done
}

// terminate sends SIGTERM and returns how long the process took to exit
// and its exit error; it fails the test when it has not exited after
// limit (and kills it).
func (p *proc) terminate(t *testing.T, limit time.Duration) (time.Duration, error) {
	t.Helper()
	begin := time.Now()
	require.NoError(t, p.cmd.Process.Signal(syscall.SIGTERM))
	select {
	case <-p.done:
		return time.Since(begin), p.waitErr()
	case <-time.After(limit):
		p.kill()
		t.Fatalf("verdict %s had not exited %v after SIGTERM", p.name, limit)
		return 0, nil
	}
}

// rssBytes is the process's resident set size (VmRSS).
func (p *proc) rssBytes(t *testing.T) int64 {
	t.Helper()
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", p.cmd.Process.Pid))
	require.NoError(t, err)
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(rest), " kB"), 10, 64)
			require.NoError(t, err, line)
			return kb << 10
		}
	}
	t.Fatalf("no VmRSS in /proc/%d/status", p.cmd.Process.Pid)
	return 0
}

// freeAddr returns a 127.0.0.1 address with a port free at the moment, for
// processes that must come back on the same address after a kill.
func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	require.NoError(t, err)
	defer l.Close()
	return l.Addr().String()
}

// upArgs are the arguments of a `verdict up` on addr over data with the
// tiny model.
func upArgs(addr, data string, extra ...string) []string {
	return append([]string{"up", "--addr", addr, "--data", data, "--model", tinyModel,
		"--threads", "2", "--log-format", "json"}, extra...)
}

// startUp starts `verdict up` and waits for its listening line; it returns
// the process and its base URL.
func startUp(t *testing.T, addr, data string, extra ...string) (*proc, string) {
	t.Helper()
	p := start(t, nil, upArgs(addr, data, extra...)...)
	rec := p.waitLog(t, msgUpListening, startTimeout)
	return p, "http://" + fmt.Sprint(rec["addr"])
}

// startServe starts `verdict serve` on 127.0.0.1 with the tiny model and
// waits until the model answers; it returns the process and its base URL.
func startServe(t *testing.T, extra ...string) (*proc, string) {
	t.Helper()
	p := start(t, nil, append([]string{"serve", "--addr", "127.0.0.1:0", "--model", tinyModel,
		"--threads", "2", "--log-format", "json"}, extra...)...)
	rec := p.waitLog(t, msgServeListening, startTimeout)
	p.waitLog(t, msgModelLoaded, startTimeout)
	return p, "http://" + fmt.Sprint(rec["addr"])
}

// awsEnv is the environment of a worker that talks to moto.
var awsEnv = []string{"AWS_ACCESS_KEY_ID=test", "AWS_SECRET_ACCESS_KEY=test",
	"AWS_CONFIG_FILE=/dev/null", "AWS_SHARED_CREDENTIALS_FILE=/dev/null", "AWS_REGION=us-east-1"}

// yesNo and queues are the options of the suite's decisions.
var (
	yesNo  = []decision.Option{{ID: "yes", Description: "Yes."}, {ID: "no", Description: "No."}}
	queues = []decision.Option{{ID: "account", Description: "Account access."}, {ID: "billing", Description: "Billing."}, {ID: "other", Description: "Anything else."}}
)

// ticketState is the state of the suite's i-th request: distinct per i,
// about reps sentences long.
func ticketState(marker string, i, reps int) string {
	return strings.Repeat(fmt.Sprintf("Ticket %d %s: the customer reports problem %d with their account and a charge on their card. ", i, marker, i), reps)
}

// envelope is the i-th queue message of a check: two decisions over one
// state, request id prefix-i.
func envelope(t *testing.T, prefix string, i, reps int, reply ...string) (queue.Outgoing, []string) {
	t.Helper()
	state := decision.TextState(ticketState(prefix, i, reps))
	env := queue.Envelope{RequestID: fmt.Sprintf("%s-%d", prefix, i), SubmittedAt: time.Now().UTC(), Route: decision.RouteCPU,
		GroupKey: router.GroupKey(state), Format: queue.FormatSemIf, Decisions: []decision.Decision{
			{ID: "queue", State: state, Question: "Which queue should handle this ticket?", Options: queues},
			{ID: "urgent", State: state, Question: "Is this ticket urgent?", Options: yesNo},
		}}
	for _, u := range reply {
		env.Reply = append(env.Reply, queue.ReplyTarget{Kind: "webhook", URL: u})
	}
	body, err := env.Marshal()
	require.NoError(t, err)
	return queue.Outgoing{Body: body, GroupID: env.GroupKey}, []string{env.RequestID + "/queue", env.RequestID + "/urgent"}
}

// semifBatch is the SemIf body of the i-th request to `verdict up`: two
// decisions over one state.
func semifBatch(marker string, i, reps int) string {
	state := ticketState(marker, i, reps)
	return fmt.Sprintf(`{"decisions": [
		{"id": "queue", "state": %[1]q, "question": "Which queue should handle this ticket?", "options": [{"id": "account", "description": "Account access."}, {"id": "billing", "description": "Billing."}, {"id": "other", "description": "Anything else."}]},
		{"id": "urgent", "state": %[1]q, "question": "Is this ticket urgent?", "options": [{"id": "yes", "description": "Yes."}, {"id": "no", "description": "No."}]}]}`, state)
}

// post sends one JSON POST and returns the status, headers and body.
func post(ctx context.Context, c *http.Client, url, body string, hdr map[string]string) (int, http.Header, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url, strings.NewReader(body))
	if err != nil {
		return 0, nil, nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, b, err
}

// requireDecided checks that a record is a decided result with
// probabilities.
func requireDecided(t *testing.T, r sink.Record) {
	t.Helper()
	require.Equal(t, decision.StatusDecided, r.Status, "%s: %+v", r.Key(), r.Result.Error)
	require.Nil(t, r.Result.Error, r.Key())
	require.NotEmpty(t, r.Result.Probabilities, r.Key())
}

// sameResult says whether two copies of one record agree: the same
// status, choice and options, and probabilities equal up to the float
// rounding a different batch composition gives (docs/worker.md).
func sameResult(a, b sink.Record) bool {
	if a.Key() != b.Key() || a.Status != b.Status || a.Result.Chosen != b.Result.Chosen ||
		len(a.Result.Probabilities) != len(b.Result.Probabilities) || fmt.Sprint(a.Result.OptionIDs) != fmt.Sprint(b.Result.OptionIDs) {
		return false
	}
	for i := range a.Result.Probabilities {
		if d := a.Result.Probabilities[i] - b.Result.Probabilities[i]; d > 1e-5 || d < -1e-5 {
			return false
		}
	}
	return true
}

// readStore returns every record of a results store file, by key.
func readStore(t *testing.T, path string) map[string]sink.Record {
	t.Helper()
	st, err := results.OpenFile(path)
	require.NoError(t, err)
	defer st.Close()
	all, err := st.All(context.Background())
	require.NoError(t, err)
	out := make(map[string]sink.Record, len(all))
	for _, s := range all {
		_, dup := out[s.Record.Key()]
		require.False(t, dup, "the store holds %s twice", s.Record.Key())
		out[s.Record.Key()] = s.Record
	}
	return out
}

// localDeadLetters counts the dead letters of a local queue file.
func localDeadLetters(t *testing.T, path, name string) int {
	t.Helper()
	q, err := queue.OpenLocal(queue.LocalConfig{Path: path, Name: name})
	require.NoError(t, err)
	defer q.Close()
	st, err := q.Stats(context.Background())
	require.NoError(t, err)
	return st.Dead
}

// eventually polls cond every interval until it holds or timeout passes.
func eventually(t *testing.T, timeout, interval time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("not within %v: "+format, append([]any{timeout}, args...)...)
		}
		time.Sleep(interval)
	}
}
