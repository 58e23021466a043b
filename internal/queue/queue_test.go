package queue_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/sqs"
	"github.com/aws/aws-sdk-go-v2/service/sqs/types"
	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/internal/queue"
	"github.com/verdict-dev/verdict/internal/queue/queuetest"
)

const helperEnv = "VERDICT_QUEUE_TEST_HELPER"

func TestMain(m *testing.M) {
	if path := os.Getenv(helperEnv); path != "" {
		start, _ := strconv.Atoi(os.Getenv(helperEnv + "_START"))
		writerMain(path, start)
		return
	}
	os.Exit(queuetest.Main(m))
}

func TestLocalSuite(t *testing.T) {
	t.Parallel()
	queuetest.RunSuite(t, func(t *testing.T, maxReceives int, _ bool) queuetest.Harness {
		clock := queuetest.NewClock()
		q, err := queue.OpenLocal(queue.LocalConfig{Path: filepath.Join(t.TempDir(), "q.db"), MaxReceives: maxReceives,
			PollInterval: 20 * time.Millisecond, NowFunc: clock.Now})
		require.NoError(t, err)
		t.Cleanup(func() { q.Close() })
		return queuetest.Harness{Queue: q, DeadLettersFunc: func(ctx context.Context) (int, error) {
			s, err := q.Stats(ctx)
			return s.Dead, err
		}, PassFunc: clock.Advance}
	})
}

func TestSQSSuite(t *testing.T) {
	t.Parallel()
	moto := queuetest.SharedMoto(t)
	queuetest.RunSuite(t, func(t *testing.T, maxReceives int, dedup bool) queuetest.Harness {
		ctx := context.Background()
		tq, err := moto.CreateQueue(ctx, "suite", queuetest.QueueOptions{FIFO: dedup, MaxReceives: maxReceives})
		require.NoError(t, err)
		aws := moto.AWS()
		q, err := queue.NewSQS(ctx, queue.SQSConfig{URL: tq.URL, Endpoint: moto.Endpoint, AWS: &aws})
		require.NoError(t, err)
		require.Equal(t, dedup, q.FIFO())
		return queuetest.Harness{Queue: q, DeadLettersFunc: func(ctx context.Context) (int, error) {
			v, f, err := moto.Count(ctx, tq.DLQURL)
			return v + f, err
		}}
	})
}

func TestSQSFIFOAttributes(t *testing.T) {
	t.Parallel()
	moto := queuetest.SharedMoto(t)
	ctx := context.Background()
	tq, err := moto.CreateQueue(ctx, "fifo", queuetest.QueueOptions{FIFO: true})
	require.NoError(t, err)
	aws := moto.AWS()
	q, err := queue.NewSQS(ctx, queue.SQSConfig{URL: tq.URL, Endpoint: moto.Endpoint, AWS: &aws})
	require.NoError(t, err)
	errs, err := q.Send(ctx, []queue.Outgoing{{Body: []byte("a"), GroupID: "group-1", Attributes: map[string]string{"k": "v"}}})
	require.NoError(t, err)
	require.NoError(t, errs[0])
	msgs, err := queuetest.Drain(ctx, q, time.Second)
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	require.Equal(t, "group-1", msgs[0].GroupID)
	require.Equal(t, "v", msgs[0].Attributes["k"])
}

// A queue that does not exist (deleted under the consumer) is told apart
// from a failure that may pass.
func TestSQSMissingQueue(t *testing.T) {
	t.Parallel()
	moto := queuetest.SharedMoto(t)
	ctx := context.Background()
	tq, err := moto.CreateQueue(ctx, "gone", queuetest.QueueOptions{})
	require.NoError(t, err)
	aws := moto.AWS()
	q, err := queue.NewSQS(ctx, queue.SQSConfig{URL: tq.URL, Endpoint: moto.Endpoint, AWS: &aws})
	require.NoError(t, err)
	_, err = moto.SQS().DeleteQueue(ctx, &sqs.DeleteQueueInput{QueueUrl: &tq.URL})
	require.NoError(t, err)
	_, err = q.Receive(ctx, queue.ReceiveOptions{Max: 1})
	require.ErrorIs(t, err, queue.ErrNoQueue)
}

func TestSQSConfigErrors(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	_, err := queue.NewSQS(ctx, queue.SQSConfig{})
	require.ErrorIs(t, err, queue.ErrConfig)
	require.ErrorContains(t, err, "SQSConfig.URL")
	_, err = queue.NewSQS(ctx, queue.SQSConfig{URL: "my-queue"})
	require.ErrorContains(t, err, "SQSConfig.URL")
}

func TestLocalConfigErrors(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "q.db")
	cases := []struct {
		field string // "" when valid
		cfg   queue.LocalConfig
	}{
		{"LocalConfig.Path", queue.LocalConfig{}},
		{"LocalConfig.MaxReceives", queue.LocalConfig{Path: path, MaxReceives: -1}},
		{"LocalConfig.Visibility", queue.LocalConfig{Path: path, Visibility: -time.Second}},
		{"LocalConfig.Visibility", queue.LocalConfig{Path: path, Visibility: 13 * time.Hour}},
		{"LocalConfig.DedupWindow", queue.LocalConfig{Path: path, DedupWindow: -time.Minute}},
		{"LocalConfig.PollInterval", queue.LocalConfig{Path: path, PollInterval: -time.Millisecond}},
		{"", queue.LocalConfig{Path: path}}, // zero values are the defaults
		{"", queue.LocalConfig{Path: path, Visibility: 12 * time.Hour, MaxReceives: 1}},
	}
	for _, tc := range cases {
		q, err := queue.OpenLocal(tc.cfg)
		if tc.field == "" {
			require.NoError(t, err)
			require.NoError(t, q.Close())
			continue
		}
		require.ErrorIs(t, err, queue.ErrConfig, tc.field)
		require.ErrorContains(t, err, tc.field)
	}
}

func TestLocalStaleReceipt(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := queuetest.NewClock()
	q, err := queue.OpenLocal(queue.LocalConfig{Path: filepath.Join(t.TempDir(), "q.db"), NowFunc: clock.Now})
	require.NoError(t, err)
	defer q.Close()
	_, err = q.Send(ctx, []queue.Outgoing{{Body: []byte("x")}})
	require.NoError(t, err)
	msgs, err := q.Receive(ctx, queue.ReceiveOptions{Max: 1, Visibility: time.Second})
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	clock.Advance(time.Second)
	again, err := q.Receive(ctx, queue.ReceiveOptions{Max: 1})
	require.NoError(t, err)
	require.Len(t, again, 1)
	errs, err := q.Delete(ctx, []string{msgs[0].Receipt, "garbage"})
	require.NoError(t, err)
	require.ErrorIs(t, errs[0], queue.ErrStaleReceipt, "the first receipt was superseded by the second receive")
	require.ErrorContains(t, errs[1], "malformed receipt")
	errs, err = q.Delete(ctx, []string{again[0].Receipt})
	require.NoError(t, err)
	require.NoError(t, errs[0])
}

func TestLocalDeadLettersAndRedrive(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := queuetest.NewClock()
	q, err := queue.OpenLocal(queue.LocalConfig{Path: filepath.Join(t.TempDir(), "q.db"), MaxReceives: 1, NowFunc: clock.Now})
	require.NoError(t, err)
	defer q.Close()
	_, err = q.Send(ctx, []queue.Outgoing{{Body: []byte("bad"), Attributes: map[string]string{"a": "b"}}})
	require.NoError(t, err)
	msgs, err := q.Receive(ctx, queue.ReceiveOptions{Max: 1, Visibility: time.Second})
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	clock.Advance(time.Second)
	msgs, err = q.Receive(ctx, queue.ReceiveOptions{Max: 1})
	require.NoError(t, err)
	require.Empty(t, msgs)
	require.EqualValues(t, 1, q.DeadLettered())
	dead, err := q.DeadLetters(ctx)
	require.NoError(t, err)
	require.Len(t, dead, 1)
	require.Equal(t, "bad", string(dead[0].Body))
	require.Equal(t, "b", dead[0].Attributes["a"])
	n, err := q.Redrive(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	msgs, err = q.Receive(ctx, queue.ReceiveOptions{Max: 1})
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	require.Equal(t, 1, msgs[0].ReceiveCount)
}

// The local queue reads time from its clock: a released message stays
// hidden until its delay has passed on that clock, to the millisecond, and
// a dedup id expires with the window.
func TestLocalClock(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	clock := queuetest.NewClock()
	q, err := queue.OpenLocal(queue.LocalConfig{Path: filepath.Join(t.TempDir(), "q.db"), NowFunc: clock.Now, DedupWindow: time.Minute})
	require.NoError(t, err)
	defer q.Close()
	_, err = q.Send(ctx, []queue.Outgoing{{Body: []byte("x"), DedupID: "d"}})
	require.NoError(t, err)
	msgs, err := q.Receive(ctx, queue.ReceiveOptions{Max: 1})
	require.NoError(t, err)
	require.Len(t, msgs, 1)
	require.Equal(t, clock.Now().UnixMilli(), msgs[0].SentAt.UnixMilli())
	errs, err := q.ChangeVisibility(ctx, []queue.Visibility{{Receipt: msgs[0].Receipt, Timeout: time.Hour}})
	require.NoError(t, err)
	require.NoError(t, errs[0])
	clock.Advance(time.Hour - time.Millisecond)
	none, err := q.Receive(ctx, queue.ReceiveOptions{Max: 1})
	require.NoError(t, err)
	require.Empty(t, none, "visible before its delay passed")
	clock.Advance(time.Millisecond)
	back, err := q.Receive(ctx, queue.ReceiveOptions{Max: 1})
	require.NoError(t, err)
	require.Len(t, back, 1)
	_, err = q.Delete(ctx, []string{back[0].Receipt})
	require.NoError(t, err)
	// The dedup window (1 min) has long passed on the clock: the same id
	// is a new message.
	_, err = q.Send(ctx, []queue.Outgoing{{Body: []byte("y"), DedupID: "d"}})
	require.NoError(t, err)
	st, err := q.Stats(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, st.Visible)
}

func TestLocalTwoQueuesOneFile(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "q.db")
	cpu, err := queue.OpenLocal(queue.LocalConfig{Path: path, Name: "cpu"})
	require.NoError(t, err)
	defer cpu.Close()
	gpu, err := queue.OpenLocal(queue.LocalConfig{Path: path, Name: "gpu"})
	require.NoError(t, err)
	defer gpu.Close()
	_, err = cpu.Send(ctx, []queue.Outgoing{{Body: []byte("for cpu")}})
	require.NoError(t, err)
	msgs, err := gpu.Receive(ctx, queue.ReceiveOptions{Max: 10})
	require.NoError(t, err)
	require.Empty(t, msgs)
	msgs, err = cpu.Receive(ctx, queue.ReceiveOptions{Max: 10})
	require.NoError(t, err)
	require.Len(t, msgs, 1)
}

// writerMain is the subprocess of TestLocalSurvivesKill9: it sends
// messages forever, receiving and deleting some, and prints the number of
// every message whose Send returned (acknowledged) on stdout.
func writerMain(path string, start int) {
	ctx := context.Background()
	q, err := queue.OpenLocal(queue.LocalConfig{Path: path})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	w := bufio.NewWriter(os.Stdout)
	for i := start; ; i += 5 {
		batch := make([]queue.Outgoing, 5)
		for j := range batch {
			batch[j] = queue.Outgoing{Body: []byte(strconv.Itoa(i + j)), Attributes: map[string]string{"n": strconv.Itoa(i + j)}}
		}
		errs, err := q.Send(ctx, batch)
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			os.Exit(1)
		}
		for j, e := range errs {
			if e == nil {
				fmt.Fprintf(w, "%d\n", i+j)
			}
		}
		w.Flush()
		// Churn: hide and release some messages so that receives, updates
		// and deletes are in flight when the kill comes.
		msgs, err := q.Receive(ctx, queue.ReceiveOptions{Max: 3, Visibility: time.Millisecond})
		if err == nil && len(msgs) > 0 {
			_, _ = q.ChangeVisibility(ctx, []queue.Visibility{{Receipt: msgs[0].Receipt, Timeout: 0}})
		}
	}
}

func TestLocalSurvivesKill9(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "q.db")
	acked := map[int]bool{}
	for round := 0; round < 3; round++ {
		cmd := exec.Command(os.Args[0], "-test.run=^$")
		cmd.Env = append(os.Environ(), helperEnv+"="+path, fmt.Sprintf("%s_START=%d", helperEnv, round*1_000_000))
		out, err := cmd.StdoutPipe()
		require.NoError(t, err)
		cmd.Stderr = os.Stderr
		require.NoError(t, cmd.Start())
		lines := make(chan int, 1024)
		go func() {
			sc := bufio.NewScanner(out)
			for sc.Scan() {
				if n, err := strconv.Atoi(strings.TrimSpace(sc.Text())); err == nil {
					lines <- n
				}
			}
			close(lines)
		}()
		// Let it write for a while, then kill -9 in the middle of things.
		timer := time.After(time.Duration(300+200*round) * time.Millisecond)
	read:
		for {
			select {
			case n, ok := <-lines:
				if !ok {
					break read
				}
				acked[n] = true
			case <-timer:
				require.NoError(t, cmd.Process.Signal(syscall.SIGKILL))
				timer = nil
			}
		}
		_ = cmd.Wait()
	}
	require.NotEmpty(t, acked, "the writer acknowledged nothing")

	// Read the file a second ahead of the writer's clock, so that its 1 ms
	// visibilities have passed.
	q, err := queue.OpenLocal(queue.LocalConfig{Path: path, NowFunc: func() time.Time { return time.Now().Add(time.Second) }})
	require.NoError(t, err)
	defer q.Close()
	require.NoError(t, q.Check(ctx))
	seen := map[int]bool{}
	msgs, err := queuetest.Drain(ctx, q, 0)
	require.NoError(t, err)
	// The writer's churn receives old messages repeatedly, so some went to
	// the dead-letter table: they are kept too.
	dead, err := q.DeadLetters(ctx)
	require.NoError(t, err)
	for _, m := range append(msgs, dead...) {
		n, err := strconv.Atoi(string(m.Body))
		require.NoError(t, err, "corrupt body %q", m.Body)
		require.Equal(t, string(m.Body), m.Attributes["n"])
		require.False(t, seen[n], "message %d twice", n)
		seen[n] = true
	}
	for n := range acked {
		require.True(t, seen[n], "acknowledged message %d was lost", n)
	}
	t.Logf("%d acknowledged messages survived 3 kill -9s (%d stored)", len(acked), len(seen))
}

func TestSQSRedrivePolicyIsMoto(t *testing.T) {
	t.Parallel()
	moto := queuetest.SharedMoto(t)
	// The DLQ the suite relies on is attached by a redrive policy.
	ctx := context.Background()
	tq, err := moto.CreateQueue(ctx, "redrive", queuetest.QueueOptions{MaxReceives: 5})
	require.NoError(t, err)
	out, err := moto.SQS().GetQueueAttributes(ctx, &sqs.GetQueueAttributesInput{QueueUrl: aws.String(tq.URL),
		AttributeNames: []types.QueueAttributeName{types.QueueAttributeNameRedrivePolicy}})
	require.NoError(t, err)
	require.Contains(t, out.Attributes[string(types.QueueAttributeNameRedrivePolicy)], "maxReceiveCount")
}

// TestLocalCloseClosesTheFile: Close returns once the file is closed, even
// when a Receive's context ended while a statement ran just before. SQLite
// removes the -wal journal when its last connection closes, so the journal
// must be gone when Close returns. Two things used to leave it behind:
// database/sql releasing the cancelled connection on a goroutine of its own
// after Close had returned, and the driver's interrupt watcher firing just
// after a statement finished, which marks the connection bad and interrupts
// SQLite's checkpoint on close. Statements now run under sqlite.CallContext (a
// deadline, no cancellation); before that about 1 round in 25 here kept the
// journal (116 of 3,000 in a longer run, 0 of 3,000 after).
func TestLocalCloseClosesTheFile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for i := range 400 {
		path := filepath.Join(dir, fmt.Sprintf("q%d.db", i))
		q, err := queue.OpenLocal(queue.LocalConfig{Path: path})
		require.NoError(t, err)
		// A message makes each Receive write (claim it), not only read.
		_, err = q.Send(context.Background(), []queue.Outgoing{{Body: []byte("x")}})
		require.NoError(t, err)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			for ctx.Err() == nil {
				_, _ = q.Receive(ctx, queue.ReceiveOptions{Max: 1, Visibility: time.Millisecond})
			}
		}()
		time.Sleep(time.Duration(i%7) * 150 * time.Microsecond)
		cancel()
		<-done
		require.NoError(t, q.Close())
		require.NoFileExists(t, path+"-wal", "round %d: the file was still open when Close returned", i)
	}
}
