package peer

import (
	"context"
	"fmt"
	"strconv"
)

// servers are the systems under test, started: verdict serve, and
// llama-server with one slot, with Config.Slots slots and, when
// configured, another build of it with one slot.
type servers struct {
	verdict *server // verdict serve
	one     *server // llama-server --parallel 1
	many    *server // llama-server --parallel Config.Slots
	alt     *server // Config.AltLlamaServer --parallel 1; nil without one
}

// systems are what startServers starts, in order.
func systems(cfg Config) []system {
	out := []system{
		{name: "verdict serve", kind: verdictServe, bin: cfg.Verdict, args: verdictArgs(cfg)},
		{name: "llama-server --parallel 1", kind: llamaServer, bin: cfg.LlamaServer, args: llamaArgs(cfg, 1)},
		{name: fmt.Sprintf("llama-server --parallel %d", cfg.Slots), kind: llamaServer, bin: cfg.LlamaServer, args: llamaArgs(cfg, cfg.Slots)},
	}
	if cfg.AltLlamaServer != "" {
		out = append(out, system{name: "llama-server (" + cfg.AltLabel + ") --parallel 1", kind: llamaServer, bin: cfg.AltLlamaServer, args: llamaArgs(cfg, 1)})
	}
	return out
}

// startServers starts every system, one after the other; on an error it
// stops those it started.
func startServers(ctx context.Context, cfg Config) (*servers, error) {
	var started []*server
	for _, sys := range systems(cfg) {
		s, err := start(ctx, sys, cfg.Log)
		if err != nil {
			for _, s := range started {
				s.stop()
			}
			return nil, err
		}
		started = append(started, s)
	}
	all := &servers{verdict: started[0], one: started[1], many: started[2]}
	if len(started) > 3 {
		all.alt = started[3]
	}
	return all, nil
}

// list is every server, verdict serve first.
func (s *servers) list() []*server {
	out := []*server{s.verdict, s.one, s.many}
	if s.alt != nil {
		out = append(out, s.alt)
	}
	return out
}

// only lets target alone run: each system is measured alone, the others
// stopped (SIGSTOP), so that an idle one's threads (llama-server's
// OpenMP threads spin for seconds after a request; its slot loop wakes up
// every so often) take nothing from the one measured.
func (s *servers) only(target *server) error {
	for _, srv := range s.list() {
		if srv != target {
			if err := srv.pause(); err != nil {
				return err
			}
		}
	}
	return target.resume()
}

// stop stops every server, the last started first.
func (s *servers) stop() {
	list := s.list()
	for i := len(list) - 1; i >= 0; i-- {
		list[i].stop()
	}
}

// verdictArgs are `verdict serve`'s flags, all but the address: the same
// threads and GPU layers as llama-server, as many requests at once as the
// concurrent modes send, and the harness's own per-request bound as
// serve's --timeout (serve's default minute is shorter than a shape-777
// state's 21 questions take on two slow cores; llama-server has no limit
// of its own).
func verdictArgs(cfg Config) []string {
	args := []string{"serve", "--model", cfg.Model, "--threads", strconv.Itoa(cfg.Threads), "--gpu-layers", strconv.Itoa(cfg.GPULayers),
		"--log-level", "warn", "--max-concurrent", strconv.Itoa(cfg.Slots), "--timeout", cfg.Timeout.String()}
	return append(args, cfg.VerdictArgs...)
}

// llamaArgs are llama-server's flags for slots parallel slots of 8,192
// tokens each, with verdict's model, threads and GPU layers, all but the
// address.
func llamaArgs(cfg Config, slots int) []string {
	th := strconv.Itoa(cfg.Threads)
	ngl := strconv.Itoa(cfg.GPULayers)
	if cfg.GPULayers < 0 {
		ngl = "all"
	}
	return []string{"-m", cfg.Model, "--threads", th, "--threads-batch", th, "--gpu-layers", ngl, "--parallel", strconv.Itoa(slots),
		"-c", strconv.Itoa(8192 * slots), "--log-disable"}
}
