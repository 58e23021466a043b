package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/internal/auth"
)

// TestListenerKeys covers the one key-and-bind check of serve and up.
func TestListenerKeys(t *testing.T) {
	t.Parallel()
	loop := "127.0.0.1:0"
	keys, err := listenerKeys(" k1 , k2=acme,c2VjcmV0==, dG9rZW4===beta ,,", loop, nil)
	require.NoError(t, err)
	require.Equal(t, map[string]string{"k1": "", "k2": "acme", "c2VjcmV0==": "", "dG9rZW4==": "beta"}, keys)

	_, err = listenerKeys("a,b,a=t", loop, nil)
	require.ErrorContains(t, err, "flag --api-keys: entry 3: duplicate key")
	_, err = listenerKeys("has space", loop, nil)
	require.ErrorContains(t, err, "entry 1")
	keys, err = listenerKeys("", loop, nil)
	require.NoError(t, err)
	require.Empty(t, keys)

	// Non-loopback: keys, or --no-auth where the command has it.
	_, err = listenerKeys("", "0.0.0.0:8080", nil)
	require.ErrorContains(t, err, "flag --addr")
	require.NotContains(t, err.Error(), "--no-auth", "up has no --no-auth flag to suggest")
	off, on := false, true
	_, err = listenerKeys("", "0.0.0.0:8080", &off)
	require.ErrorContains(t, err, "--no-auth")
	_, err = listenerKeys("", "0.0.0.0:8080", &on)
	require.NoError(t, err)
	_, err = listenerKeys("k1", "0.0.0.0:8080", nil)
	require.NoError(t, err)
}

func TestServeSplitList(t *testing.T) {
	t.Parallel()
	require.Equal(t, []string{}, splitList(""))
	require.Equal(t, []string{"a", "b"}, splitList(" a,,b "))
}

func TestServeRefusesBadSetup(t *testing.T) {
	t.Parallel()
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--addr", "0.0.0.0:0"}, auth.ErrAuthRequired.Error()},
		{[]string{"--addr", ":0"}, "flag --addr"},
		{[]string{"--addr", "127.0.0.1:0", "--max-concurrent", "0"}, "flag --max-concurrent"},
		{[]string{"--addr", "127.0.0.1:0", "--timeout", "-1s"}, "flag --timeout"},
		{[]string{"--addr", "127.0.0.1:0", "--max-state-bytes", "-5"}, "flag --max-state-bytes"},
		{[]string{"--addr", "127.0.0.1:0", "--api-keys", "a b"}, "flag --api-keys"},
		{[]string{"--addr", "127.0.0.1:0", "--policy", "/nonexistent/policy.yaml"}, "flag --policy"},
		{[]string{"--addr", "127.0.0.1:0", "--model", "/nonexistent/model.gguf"}, "flag --model"},
		{[]string{"--addr", "127.0.0.1:0", "extra"}, "unexpected argument"},
	} {
		err := runServe(context.Background(), c.args)
		require.Error(t, err, "%v", c.args)
		require.ErrorContains(t, err, c.want, "%v", c.args)
	}
}
