// Package hugepages puts the large buffers that llama.cpp allocates through
// the C library — the model weights when they are read into memory, the KV
// cache, the compute buffers — on transparent huge pages (THP).
//
// A decode streams every weight through the cores, and with 4 KiB pages
// that costs a TLB miss every 4 KiB; on 2 MiB pages the same F16 matmuls
// ran ~10% faster here (docs/performance.md). The kernel gives huge pages
// to anonymous memory only (a mapped model file stays on 4 KiB pages), and
// with THP in its common "madvise" mode only to ranges that ask for them.
// ggml allocates with posix_memalign, so the ask has to come from glibc:
// its malloc tunable glibc.malloc.hugetlb=1 (glibc 2.35 and later) madvises
// every chunk it maps. Tunables are read when the process starts, so
// Reexec starts the binary again with the tunable set, once, before
// anything else runs.
package hugepages

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
)

const (
	// Tunable is glibc's malloc setting that madvises its mapped chunks
	// and its heap for transparent huge pages (value 1).
	Tunable = "glibc.malloc.hugetlb"
	// EnvSwitch set to "off" leaves the process as it was started.
	EnvSwitch = "VERDICT_HUGEPAGES"
	// envAdded marks a process whose GLIBC_TUNABLES Reexec extended, and
	// holds what it was before ("-" when unset), so that child processes
	// of other programs get the environment they would have had.
	envAdded = "VERDICT_HUGEPAGES_ADDED"
	glibcEnv = "GLIBC_TUNABLES"
	// thpEnabled is where the kernel says when anonymous memory gets
	// huge pages.
	thpEnabled = "/sys/kernel/mm/transparent_hugepage/enabled"
)

// Mode is the kernel's THP mode: "always", "madvise" or "never"; "" when
// it cannot be read (not Linux, no THP).
func Mode() string {
	b, err := os.ReadFile(thpEnabled)
	if err != nil {
		return ""
	}
	return parseMode(string(b))
}

// parseMode picks the bracketed choice of the kernel's list, as in
// "always [madvise] never".
func parseMode(s string) string {
	for _, f := range strings.Fields(s) {
		if len(f) > 2 && f[0] == '[' && f[len(f)-1] == ']' {
			return f[1 : len(f)-1]
		}
	}
	return ""
}

// tunableValue is the value GLIBC_TUNABLES gives glibc.malloc.hugetlb
// ("" when it gives none). Its syntax is name=value pairs joined by ':'.
func tunableValue(env string) string {
	for _, kv := range strings.Split(env, ":") {
		if v, ok := strings.CutPrefix(kv, Tunable+"="); ok {
			return v
		}
	}
	return ""
}

// Malloc reports whether glibc's large allocations in this process go on
// huge pages: THP "always", or "madvise" with the tunable at 1 (what
// Reexec sets). glibc before 2.35 ignores the tunable; callers that can
// ask the C library its version check that too.
func Malloc() bool {
	switch Mode() {
	case "always":
		return true
	case "madvise":
		return tunableValue(os.Getenv(glibcEnv)) == "1"
	}
	return false
}

// withTunable returns environ with glibc.malloc.hugetlb=1 added to
// GLIBC_TUNABLES and the mark of what it was, or ok false when nothing is
// to be added: the switch is off, or GLIBC_TUNABLES already sets the
// tunable (whatever its value: the caller's choice stands).
func withTunable(environ []string) (_ []string, ok bool) {
	before, set := "", false
	for _, kv := range environ {
		k, v, _ := strings.Cut(kv, "=")
		switch k {
		case EnvSwitch:
			if v == "off" {
				return environ, false
			}
		case glibcEnv:
			before, set = v, true
		case envAdded:
			return environ, false // added once already: never loop
		}
	}
	if set && tunableValue(before) != "" {
		return environ, false
	}
	out := make([]string, 0, len(environ)+2)
	for _, kv := range environ {
		if !strings.HasPrefix(kv, glibcEnv+"=") {
			out = append(out, kv)
		}
	}
	value, mark := Tunable+"=1", "-"
	if set {
		mark = before
		if before != "" {
			value = before + ":" + value
		}
	}
	return append(out, glibcEnv+"="+value, envAdded+"="+mark), true
}

// Reexec starts the running binary again, same arguments, with the
// tunable set, when that gives this process huge pages it would not have:
// on Linux, with THP in "madvise" mode, unless VERDICT_HUGEPAGES=off or
// GLIBC_TUNABLES already sets it. It returns only when it does not re-exec
// (nil) or the exec failed (the error; the process goes on as it is).
// Call it first in main, before any C code allocates.
func Reexec() error {
	if runtime.GOOS != "linux" || Mode() != "madvise" {
		return nil
	}
	env, ok := withTunable(os.Environ())
	if !ok {
		return nil
	}
	exe, err := os.Executable()
	if err != nil {
		return fmt.Errorf("hugepages: %w", err)
	}
	return fmt.Errorf("hugepages: exec %s: %w", exe, syscall.Exec(exe, os.Args, env))
}

// Original undoes Reexec's change in environ: GLIBC_TUNABLES as it was
// when this process was first started, and no mark. Processes of other
// programs that verdict starts (llama-server in bench --peer) get it, so
// that they run as their users run them.
func Original(environ []string) []string {
	before, added := "", false
	for _, kv := range environ {
		if v, ok := strings.CutPrefix(kv, envAdded+"="); ok {
			before, added = v, true
		}
	}
	if !added {
		return environ
	}
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		if strings.HasPrefix(kv, envAdded+"=") || strings.HasPrefix(kv, glibcEnv+"=") {
			continue
		}
		out = append(out, kv)
	}
	if before != "-" {
		out = append(out, glibcEnv+"="+before)
	}
	return out
}

// AnonHuge is the bytes of anonymous memory on huge pages in process pid
// (0: this one), from /proc/<pid>/smaps_rollup.
func AnonHuge(pid int) (int64, error) {
	p := "/proc/self/smaps_rollup"
	if pid > 0 {
		p = "/proc/" + strconv.Itoa(pid) + "/smaps_rollup"
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return 0, err
	}
	return parseAnonHuge(b)
}

func parseAnonHuge(b []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		rest, ok := strings.CutPrefix(sc.Text(), "AnonHugePages:")
		if !ok {
			continue
		}
		f := strings.Fields(rest)
		if len(f) != 2 || f[1] != "kB" {
			return 0, fmt.Errorf("hugepages: smaps_rollup: AnonHugePages: unexpected %q", rest)
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("hugepages: smaps_rollup: AnonHugePages: %w", err)
		}
		return kb << 10, nil
	}
	return 0, errors.New("hugepages: smaps_rollup has no AnonHugePages line")
}
