//go:build cgo

package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/verdict-dev/verdict/engine/llamacpp"
	"github.com/verdict-dev/verdict/internal/bench"
	"github.com/verdict-dev/verdict/internal/bench/peer"
)

// peerFlags are `verdict bench --peer`'s settings.
type peerFlags struct {
	name, llamaServer, model, data, jevbench, out string
	altServer, altLabel                           string
	workload                                      string // jevbench or shape777
	cases, slots, threads, rounds                 int
	independent                                   int    // states of the independent workload; 0: as the shared one
	states, questions                             int    // shape777's size
	gpuLayers                                     int    // --gpu-layers, resolved for this build's devices
	cacheTokens                                   int    // --prefix-cache-tokens for verdict serve (0: its default)
	cacheStore                                    string // --prefix-cache-store for verdict serve
	settle                                        time.Duration
}

// runPeer compares `verdict serve` with llama-server on the same model
// (package bench/peer) and prints the table.
func runPeer(ctx context.Context, f peerFlags) error {
	switch {
	case f.name != "llama-server":
		return fmt.Errorf("flag --peer: %q is not a known peer (llama-server)", f.name)
	case f.llamaServer == "":
		return fmt.Errorf("flag --llama-server: required with --peer llama-server (make llama-server prints it)")
	case f.cases < 1:
		return fmt.Errorf("flag --peer-cases: must be >= 1, got %d", f.cases)
	case f.independent < 0:
		return fmt.Errorf("flag --peer-independent: must be >= 0, got %d", f.independent)
	case f.slots < 1:
		return fmt.Errorf("flag --peer-slots: must be >= 1, got %d", f.slots)
	case f.workload != "jevbench" && f.workload != "shape777":
		return fmt.Errorf("flag --peer-workload: %q is not a workload (jevbench or shape777)", f.workload)
	case f.workload == "shape777" && (f.states < 1 || f.questions < 1):
		return fmt.Errorf("flag --states, --questions: shape777 needs at least one of each, got %d and %d", f.states, f.questions)
	}
	if _, err := os.Stat(f.llamaServer); err != nil {
		return fmt.Errorf("flag --llama-server: %w", err)
	}
	if f.altServer != "" {
		if _, err := os.Stat(f.altServer); err != nil {
			return fmt.Errorf("flag --llama-server-alt: %w", err)
		}
		if f.altLabel == "" {
			return fmt.Errorf("flag --llama-server-alt-label: required with --llama-server-alt (how that build differs)")
		}
	}
	var err error
	if f.model == "" {
		if f.model, err = synthModel(f.data, "small"); err != nil {
			return err
		}
	}
	// load returns n states of the chosen workload.
	load := func(n int) ([][]byte, error) {
		if f.workload == "shape777" {
			return shape777Cases(f, n)
		}
		lines, err := readLines(bench.JevBenchCases(f.jevbench), n)
		if errors.Is(err, fs.ErrNotExist) {
			return nil, fmt.Errorf("flag --jevbench: JevBench-240 is not at %s: %s", f.jevbench, bench.JevBenchHowTo)
		}
		if err != nil {
			return nil, fmt.Errorf("flag --jevbench: %w", err)
		}
		return lines, nil
	}
	shared := f.cases
	if f.workload == "shape777" {
		shared = f.states
	}
	cases, err := load(shared)
	if err != nil {
		return err
	}
	var independent [][]byte
	if f.independent > 0 {
		if independent, err = load(f.independent); err != nil {
			return err
		}
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	threads := f.threads
	if threads == 0 {
		threads = llamacpp.Options{}.WithDefaults().Threads // the engine's default: physical cores
	}
	rep, err := peer.Run(ctx, peer.Config{Verdict: self, LlamaServer: f.llamaServer, AltLlamaServer: f.altServer, AltLabel: f.altLabel, Model: f.model, Threads: threads,
		GPULayers: f.gpuLayers, Cases: cases, IndependentCases: independent, Rounds: f.rounds, Slots: f.slots, Log: os.Stderr,
		Settle: f.settle, VerdictArgs: []string{"--prefix-cache-tokens", strconv.Itoa(f.cacheTokens), "--prefix-cache-store", f.cacheStore}})
	if err != nil {
		return err
	}
	fmt.Printf("verdict serve vs llama-server: %s, %d threads\n", f.model, threads)
	rep.WriteTable(os.Stdout)
	if f.out != "" {
		b, err := json.MarshalIndent(rep, "", "  ")
		if err == nil {
			err = os.WriteFile(f.out, b, 0o644)
		}
		if err != nil {
			return fmt.Errorf("flag --out: %w", err)
		}
	}
	return nil
}

// shape777Cases is W1's shape-777 workload (states states of ~1,800
// tokens, f.questions questions each) as System One requests, sized with
// the model's own tokenizer.
func shape777Cases(f peerFlags, states int) ([][]byte, error) {
	e, err := llamacpp.New(llamacpp.Options{ModelPath: f.model, Threads: 1, GPULayers: 0, NoPrefixCache: true})
	if err != nil {
		return nil, err
	}
	defer e.Close()
	return bench.Shape777Requests(e, states, f.questions, bench.Shape777StateTokens, bench.Shape777SuffixTokens)
}

// readLines returns up to n non-empty lines of path.
func readLines(path string, n int) ([][]byte, error) {
	fh, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer fh.Close()
	var out [][]byte
	sc := bufio.NewScanner(fh)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	for sc.Scan() && len(out) < n {
		if line := strings.TrimSpace(sc.Text()); line != "" {
			out = append(out, []byte(line))
		}
	}
	return out, sc.Err()
}
