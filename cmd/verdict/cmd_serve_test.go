package main

import (
	"context"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/auth"
)

func TestServeParseAPIKeys(t *testing.T) {
	t.Parallel()
	keys, err := parseAPIKeys(" k1 , k2=acme,c2VjcmV0==, dG9rZW4===beta ,,")
	require.NoError(t, err)
	require.Equal(t, map[string]string{"k1": "", "k2": "acme", "c2VjcmV0==": "", "dG9rZW4==": "beta"}, keys)

	_, err = parseAPIKeys("a,b,a=t")
	require.ErrorContains(t, err, "flag --api-keys: entry 3: duplicate key")
	_, err = parseAPIKeys("has space")
	require.ErrorContains(t, err, "entry 1")
	keys, err = parseAPIKeys("")
	require.NoError(t, err)
	require.Empty(t, keys)
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
