package bench

import (
	"bufio"
	"context"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/verdict-dev/verdict/decision"
)

// Rotation is the order in which round r (0-based) runs n modes: rotated
// by r, so that no mode always runs right after the same one. A server
// whose threads keep spinning for a while after its turn (an OpenMP
// build waits that way) would otherwise always slow the same neighbour.
func Rotation(r, n int) []int {
	order := make([]int, n)
	for i := range order {
		order[i] = (r + i) % n
	}
	return order
}

// Interleave runs rounds of n modes, each round in Rotation's order,
// waiting before every mode until the machine is quiet (Quiet, at most
// settle; 0: no wait). begin, when not nil, prepares each round first. It
// stops at the first error.
func Interleave(ctx context.Context, rounds, n int, settle time.Duration, begin func(round int) error, run func(round, mode int) error) error {
	for r := 0; r < rounds; r++ {
		if begin != nil {
			if err := begin(r); err != nil {
				return err
			}
		}
		for _, i := range Rotation(r, n) {
			Quiet(ctx, settle)
			if err := run(r, i); err != nil {
				return err
			}
		}
	}
	return nil
}

// quietIdle is the share of CPU time that must be idle, over quietWindow,
// for the machine to count as quiet.
const (
	quietIdle   = 0.9
	quietWindow = 200 * time.Millisecond
)

// Quiet waits until this machine's CPUs have been idle for at least 90% of
// a 200 ms window (what the last mode left running, such as threads
// spinning after their work, has stopped), or max has passed, or ctx is
// done, and returns how long it waited. max <= 0 does not wait. Where
// /proc/stat cannot be read it waits one window.
func Quiet(ctx context.Context, max time.Duration) time.Duration {
	return quiet(ctx, max, quietWindow, cpuTimes, wallClock{})
}

// clock is what quiet needs of time: a reading, and a wait that ends
// early, returning false, when ctx is done.
type clock interface {
	Now() time.Time
	Sleep(ctx context.Context, d time.Duration) bool
}

// wallClock is the clock of the machine.
type wallClock struct{}

func (wallClock) Now() time.Time { return time.Now() }

func (wallClock) Sleep(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}

// quiet is Quiet with its sampling window, CPU-time reader and clock
// given: it samples read every window until the CPUs were idle over one,
// max has passed or ctx is done, and returns how long it waited.
func quiet(ctx context.Context, max, window time.Duration, read func() (idle, total uint64, ok bool), clk clock) time.Duration {
	if max <= 0 {
		return 0
	}
	start := clk.Now()
	for {
		idle0, total0, ok := read()
		if !clk.Sleep(ctx, window) || !ok {
			return clk.Now().Sub(start)
		}
		idle1, total1, ok := read()
		waited := clk.Now().Sub(start)
		if !ok || total1 <= total0 || float64(idle1-idle0)/float64(total1-total0) >= quietIdle || waited >= max {
			return waited
		}
	}
}

// cpuTimes reads the idle (idle + iowait) and total CPU time of all CPUs
// from /proc/stat, in clock ticks.
func cpuTimes() (idle, total uint64, ok bool) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return 0, 0, false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	if !sc.Scan() {
		return 0, 0, false
	}
	fields := strings.Fields(sc.Text())
	if len(fields) < 6 || fields[0] != "cpu" {
		return 0, 0, false
	}
	for i, s := range fields[1:] {
		v, err := strconv.ParseUint(s, 10, 64)
		if err != nil {
			return 0, 0, false
		}
		total += v
		if i == 3 || i == 4 { // idle, iowait
			idle += v
		}
	}
	return idle, total, true
}

// interleaveWidth is how many states take turns in the interleaved mode.
const interleaveWidth = 4

// Interleaved orders the decisions of groups (each a state's questions)
// the way k conversations at a time would send them: within each run of k
// consecutive states, one question of each state in turn.
func Interleaved(groups [][]decision.Decision, k int) []decision.Decision {
	var out []decision.Decision
	for lo := 0; lo < len(groups); lo += k {
		win := groups[lo:min(lo+k, len(groups))]
		for q := 0; ; q++ {
			added := false
			for _, g := range win {
				if q < len(g) {
					out = append(out, g[q])
					added = true
				}
			}
			if !added {
				break
			}
		}
	}
	return out
}
