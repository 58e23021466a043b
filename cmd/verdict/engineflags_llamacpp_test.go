//go:build cgo

package main

import (
	"flag"
	"io"
	"os"
	"path/filepath"
	"testing"

	"github.com/stretchr/testify/require"
)

// An engine option the engine refuses is reported under the flag that set
// it, with the bad value, before any model is read.
func TestEngineOptionErrorsNameTheFlag(t *testing.T) {
	model := filepath.Join(t.TempDir(), "m.gguf")
	require.NoError(t, os.WriteFile(model, []byte("not read"), 0o644))
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--prefix-cache-tokens", "-1"}, "flag --prefix-cache-tokens: must be >= 0, got -1"},
		{[]string{"--prefix-cache-store", "disk"}, `flag --prefix-cache-store: must be auto, kv or host, got "disk"`},
		{[]string{"--branch-batch", "-1"}, "flag --branch-batch: must be 1..BatchSize (2048), got -1"},
		{[]string{"--seq-max", "2"}, "flag --seq-max: must be 3..256, got 2"},
		{[]string{"--threads", "-3"}, "flag --threads: must be >= 1, got -3"},
		{[]string{"--flash-attn", "sometimes"}, `flag --flash-attn: must be auto, on or off, got "sometimes"`},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		var ef engineFlags
		ef.register(fs)
		require.NoError(t, fs.Parse(append([]string{"--model", model}, tc.args...)))
		_, err := ef.open("")
		require.EqualError(t, err, tc.want, "%v", tc.args)
	}
}

// --no-mmap, the flag before --mmap, still works: it is --mmap off at its
// place on the command line, so a later --mmap wins, as a repeated flag does.
func TestNoMmapIsMmapOff(t *testing.T) {
	for _, tc := range []struct {
		args []string
		want string
	}{
		{nil, "auto"},
		{[]string{"--no-mmap"}, "off"},
		{[]string{"--no-mmap=false"}, "auto"},
		{[]string{"--mmap", "on", "--no-mmap"}, "off"},
		{[]string{"--no-mmap", "--mmap", "on"}, "on"},
	} {
		fs := flag.NewFlagSet("t", flag.ContinueOnError)
		var ef engineFlags
		ef.register(fs)
		require.NoError(t, fs.Parse(tc.args), "%v", tc.args)
		require.Equal(t, tc.want, ef.options("m.gguf").Mmap, "%v", tc.args)
	}
	fs := flag.NewFlagSet("t", flag.ContinueOnError)
	fs.SetOutput(io.Discard)
	var ef engineFlags
	ef.register(fs)
	require.ErrorContains(t, fs.Parse([]string{"--no-mmap=maybe"}), `invalid boolean value "maybe" for -no-mmap`)
}
