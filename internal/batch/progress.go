package batch

import (
	"fmt"
	"io"
	"time"

	"github.com/schollz/progressbar/v3"
)

// Snapshot is the state of a run, for progress reports.
type Snapshot struct {
	Lines, Decisions, Failed int
	// Bytes of input read, of TotalBytes (0 when unknown).
	Bytes, TotalBytes int64
	Elapsed           time.Duration
	// Stage is set by Submit: StageSubmit while chunks are sent, then
	// StageCollect while their results are gathered ("" for Run).
	Stage string
	// Chunks is the number of chunks planned so far, ChunksDone of them
	// sent (StageSubmit) or collected (StageCollect).
	Chunks, ChunksDone int
}

// Stages of Submit.
const (
	StageSubmit  = "submit"
	StageCollect = "collect"
)

// Progress is told how a run goes: after every scored chunk, and once at
// the end.
type Progress interface {
	Update(Snapshot)
	Finish(Snapshot)
}

// Plain writes one line every Every (and a last one at the end), for logs
// and files where a redrawn bar would be noise.
type Plain struct {
	// W receives the lines.
	W io.Writer
	// Every is the interval between lines. Defaults to 10 s.
	Every time.Duration
	// NowFunc is the clock. Defaults to time.Now.
	NowFunc func() time.Time
	last    time.Time
}

// Update writes a line when Every has passed since the last one.
func (p *Plain) Update(s Snapshot) {
	now := p.now()
	if p.last.IsZero() {
		p.last = now
		return
	}
	every := p.Every
	if every <= 0 {
		every = 10 * time.Second
	}
	if now.Sub(p.last) < every {
		return
	}
	p.last = now
	fmt.Fprintln(p.W, "batch: "+describe(s))
}

// Finish writes the last line.
func (p *Plain) Finish(s Snapshot) { fmt.Fprintln(p.W, "batch: done: "+describe(s)) }

func (p *Plain) now() time.Time {
	if p.NowFunc != nil {
		return p.NowFunc()
	}
	return time.Now()
}

func describe(s Snapshot) string {
	rate := 0.0
	if s.Elapsed > 0 {
		rate = float64(s.Decisions) / s.Elapsed.Seconds()
	}
	out := ""
	switch s.Stage {
	case StageSubmit:
		out = fmt.Sprintf("submitting: %d of %d chunks sent, ", s.ChunksDone, s.Chunks)
	case StageCollect:
		out = fmt.Sprintf("collecting: %d of %d chunks done, ", s.ChunksDone, s.Chunks)
	}
	out += fmt.Sprintf("%d lines, %d decisions (%d failed), %.1f decisions/s", s.Lines, s.Decisions, s.Failed, rate)
	if s.TotalBytes > 0 {
		frac := float64(s.Bytes) / float64(s.TotalBytes)
		out += fmt.Sprintf(", %.1f%% of input", 100*frac)
		if frac > 0 && frac < 1 {
			eta := time.Duration(float64(s.Elapsed) * (1 - frac) / frac).Round(time.Second)
			out += fmt.Sprintf(", ETA %s", eta)
		}
	}
	return out
}

// Bar draws a progress bar over the input bytes (with decisions/s and ETA)
// on a terminal.
type Bar struct {
	bar *progressbar.ProgressBar
}

// NewBar returns a bar that draws on w; total is the input size in bytes
// (-1 when unknown: a spinner).
func NewBar(w io.Writer, total int64) *Bar {
	if total <= 0 {
		total = -1
	}
	return &Bar{bar: progressbar.NewOptions64(total,
		progressbar.OptionSetWriter(w),
		progressbar.OptionSetDescription("scoring"),
		progressbar.OptionShowBytes(false),
		progressbar.OptionSetPredictTime(true),
		progressbar.OptionShowElapsedTimeOnFinish(),
		progressbar.OptionThrottle(200*time.Millisecond),
		progressbar.OptionFullWidth(),
	)}
}

// Update redraws the bar.
func (b *Bar) Update(s Snapshot) {
	rate := 0.0
	if s.Elapsed > 0 {
		rate = float64(s.Decisions) / s.Elapsed.Seconds()
	}
	desc := fmt.Sprintf("%d decisions, %.1f/s, %d failed", s.Decisions, rate, s.Failed)
	if s.Stage != "" {
		desc = fmt.Sprintf("%s %d/%d chunks, %s", s.Stage, s.ChunksDone, s.Chunks, desc)
	}
	b.bar.Describe(desc)
	_ = b.bar.Set64(s.Bytes)
}

// Finish completes the bar.
func (b *Bar) Finish(s Snapshot) {
	b.Update(s)
	_ = b.bar.Finish()
}
