package policy

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/verdict-dev/verdict/decision"
)

// Holder keeps the current policy and swaps it atomically on reload. A
// reload that fails keeps the previous policy whole: a policy is either
// fully applied or not at all. Holder is safe for concurrent use.
type Holder struct {
	path string
	cur  atomic.Pointer[Policy]
	mu   sync.Mutex // serializes reloads
	// pools, when set (RequirePools), are the pools every policy held
	// must escalate within; whole: they are the whole deployment.
	pools []decision.Route
	whole bool
}

// NewHolder loads the policy file at path. An empty path holds Default()
// and Reload does nothing.
func NewHolder(path string) (*Holder, error) {
	h := &Holder{path: path}
	if path == "" {
		h.cur.Store(Default())
		return h, nil
	}
	p, err := Load(path)
	if err != nil {
		return nil, err
	}
	h.cur.Store(p)
	return h, nil
}

// HolderOf holds a fixed policy (nil means Default()); Reload does nothing.
func HolderOf(p *Policy) *Holder {
	if p == nil {
		p = Default()
	}
	h := &Holder{}
	h.cur.Store(p)
	return h
}

// Path is the policy file the holder reloads ("" for a fixed policy).
func (h *Holder) Path() string { return h.path }

// Current returns the policy in force. Use the same *Policy for Before and
// After of one decision.
func (h *Holder) Current() *Policy { return h.cur.Load() }

// Reload reads the policy file again and swaps it in. On any error the
// current policy stays in force and the error says why (it matches ErrRead
// or ErrInvalid).
func (h *Holder) Reload() error {
	if h.path == "" {
		return nil
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	p, err := Load(h.path)
	if err == nil && h.pools != nil {
		err = withFile(p.CheckPools(h.pools, h.whole), h.path)
	}
	if err != nil {
		return fmt.Errorf("policy reload kept version %s: %w", short(h.Current().Version()), err)
	}
	h.cur.Store(p)
	return nil
}

// RequirePools checks the policy held against the pools a runtime reaches
// (Policy.CheckPools), and makes every later Reload refuse a policy that
// escalates outside them. A runtime calls it once, before it starts.
func (h *Holder) RequirePools(pools []decision.Route, whole bool) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if err := withFile(h.Current().CheckPools(pools, whole), h.path); err != nil {
		return err
	}
	h.pools, h.whole = append([]decision.Route{}, pools...), whole
	return nil
}

// withFile names the policy file in a *LoadError.
func withFile(err error, path string) error {
	var le *LoadError
	if errors.As(err, &le) && le.File == "" {
		le.File = path
	}
	return err
}

// WatchSIGHUP reloads the policy on every SIGHUP until ctx is done, then
// returns. It blocks: run it in its own goroutine. onErr (may be nil) is
// called with each failed reload; the previous policy stays in force.
func (h *Holder) WatchSIGHUP(ctx context.Context, onErr func(error)) {
	ch := make(chan os.Signal, 1)
	signal.Notify(ch, syscall.SIGHUP)
	defer signal.Stop(ch)
	for {
		select {
		case <-ctx.Done():
			return
		case <-ch:
			if err := h.Reload(); err != nil && onErr != nil {
				onErr(err)
			}
		}
	}
}
