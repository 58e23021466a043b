package hugepages

import (
	"slices"
	"testing"

	"github.com/stretchr/testify/require"
)

func TestParseMode(t *testing.T) {
	for in, want := range map[string]string{
		"always [madvise] never\n": "madvise",
		"[always] madvise never":   "always",
		"always madvise [never]":   "never",
		"always madvise never":     "",
		"":                         "",
		"[]":                       "",
	} {
		require.Equal(t, want, parseMode(in), "%q", in)
	}
}

func TestWithTunableAndOriginal(t *testing.T) {
	base := []string{"PATH=/bin", "HOME=/root"}
	for _, tc := range []struct {
		name    string
		env     []string
		ok      bool
		tunable string // GLIBC_TUNABLES after
	}{
		{"unset", base, true, Tunable + "=1"},
		{"other tunables kept first", append(slices.Clone(base), "GLIBC_TUNABLES=glibc.malloc.arena_max=2"), true, "glibc.malloc.arena_max=2:" + Tunable + "=1"},
		{"set but empty", append(slices.Clone(base), "GLIBC_TUNABLES="), true, Tunable + "=1"},
		{"the caller's value stands", append(slices.Clone(base), "GLIBC_TUNABLES="+Tunable+"=0"), false, Tunable + "=0"},
		{"switched off", append(slices.Clone(base), EnvSwitch+"=off"), false, ""},
		{"never twice", append(slices.Clone(base), envAdded+"=-"), false, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := withTunable(tc.env)
			require.Equal(t, tc.ok, ok)
			require.Equal(t, tc.tunable, lookup(got, glibcEnv))
			require.Equal(t, "/bin", lookup(got, "PATH"), "the rest is kept")
			if !ok {
				require.Equal(t, tc.env, got)
				return
			}
			require.Equal(t, "1", tunableValue(lookup(got, glibcEnv)))
			// What a child of another program gets back: the start's.
			back := Original(got)
			require.ElementsMatch(t, tc.env, back)
		})
	}
	require.Equal(t, base, Original(base), "nothing added, nothing changed")
}

func lookup(env []string, key string) string {
	for _, kv := range env {
		if len(kv) > len(key) && kv[:len(key)+1] == key+"=" {
			return kv[len(key)+1:]
		}
	}
	return ""
}

func TestParseAnonHuge(t *testing.T) {
	n, err := parseAnonHuge([]byte("Rss:  1017428 kB\nAnonymous: 12 kB\nAnonHugePages:    966656 kB\nShmemPmdMapped: 0 kB\n"))
	require.NoError(t, err)
	require.Equal(t, int64(966656)<<10, n)
	for _, bad := range []string{"Rss: 1 kB\n", "AnonHugePages: x kB\n", "AnonHugePages: 12\n", "AnonHugePages: 12 MB\n"} {
		_, err := parseAnonHuge([]byte(bad))
		require.Error(t, err, "%q", bad)
	}
}

// This process's own reading works where the kernel has smaps_rollup.
func TestAnonHugeOfThisProcess(t *testing.T) {
	if Mode() == "" {
		t.Skip("no transparent huge pages here")
	}
	n, err := AnonHuge(0)
	require.NoError(t, err)
	require.GreaterOrEqual(t, n, int64(0))
}
