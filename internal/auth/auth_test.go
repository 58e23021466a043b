package auth_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/internal/auth"
)

func hdr(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Set(kv[i], kv[i+1])
	}
	return h
}

func TestPresentedHeaderPrecedence(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		h    http.Header
		want string
		err  error
	}{
		{"none", hdr(), "", nil},
		{"bearer", hdr("Authorization", "Bearer k1"), "k1", nil},
		{"bearer any case", hdr("Authorization", "bEaReR k1"), "k1", nil},
		{"bearer padded", hdr("Authorization", "  Bearer   k1  "), "k1", nil},
		{"bearer without token", hdr("Authorization", "Bearer"), "", nil},
		{"bearer blank token", hdr("Authorization", "Bearer    "), "", nil},
		{"other scheme is not a key", hdr("Authorization", "Basic azE6"), "", nil},
		{"aws signature is not a key", hdr("Authorization", "AWS4-HMAC-SHA256 Credential=x"), "", nil},
		{"x-api-key", hdr("X-Api-Key", "k2"), "k2", nil},
		{"x-api-key any case of name", http.Header{"x-api-key": {"k2"}}, "", nil}, // not canonical: net/http canonicalises on receipt
		{"both, same key", hdr("Authorization", "Bearer k1", "X-Api-Key", "k1"), "k1", nil},
		{"both, different keys", hdr("Authorization", "Bearer k1", "X-Api-Key", "k2"), "", auth.ErrTwoKeys},
		{"x-api-key and another scheme", hdr("Authorization", "Basic azE6", "X-Api-Key", "k2"), "k2", nil},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := auth.Presented(tc.h)
			require.ErrorIs(t, err, tc.err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestCheck(t *testing.T) {
	t.Parallel()
	keys := map[string]string{"key-acme-1": "acme", "key-default-1": "", "key-acme-1-longer": "other"}
	withKeys, err := auth.New(keys, false)
	require.NoError(t, err)
	withKeysAnon, err := auth.New(keys, true)
	require.NoError(t, err)
	off, err := auth.New(nil, true)
	require.NoError(t, err)
	closed, err := auth.New(nil, false)
	require.NoError(t, err)

	cases := []struct {
		name     string
		a        *auth.Authenticator
		h        http.Header
		identity string
		want     auth.Caller
		err      error
	}{
		{"good bearer key names its tenant", withKeys, hdr("Authorization", "Bearer key-acme-1"), "", auth.Caller{Tenant: "acme", Key: "key-acme-1"}, nil},
		{"good x-api-key", withKeys, hdr("X-Api-Key", "key-acme-1"), "", auth.Caller{Tenant: "acme", Key: "key-acme-1"}, nil},
		{"default tenant", withKeys, hdr("X-Api-Key", "key-default-1"), "", auth.Caller{Key: "key-default-1"}, nil},
		{"prefix of a key", withKeys, hdr("X-Api-Key", "key-acme"), "", auth.Caller{}, auth.ErrBadKey},
		{"key plus a suffix", withKeys, hdr("X-Api-Key", "key-acme-12"), "", auth.Caller{}, auth.ErrBadKey},
		{"longer key matches only itself", withKeys, hdr("X-Api-Key", "key-acme-1-longer"), "", auth.Caller{Tenant: "other", Key: "key-acme-1-longer"}, nil},
		{"no key", withKeys, hdr(), "", auth.Caller{}, auth.ErrNoKey},
		{"two different keys", withKeys, hdr("Authorization", "Bearer key-acme-1", "X-Api-Key", "key-default-1"), "", auth.Caller{}, auth.ErrTwoKeys},
		{"identity without a key", withKeys, hdr(), "arn:aws:iam::1:user/u", auth.Caller{Tenant: "arn:aws:iam::1:user/u", Identity: "arn:aws:iam::1:user/u"}, nil},
		{"a bad key is refused even with an identity", withKeys, hdr("X-Api-Key", "nope"), "id", auth.Caller{}, auth.ErrBadKey},
		{"a key wins over the identity", withKeys, hdr("X-Api-Key", "key-acme-1"), "id", auth.Caller{Tenant: "acme", Key: "key-acme-1", Identity: "id"}, nil},
		{"anonymous allowed", withKeysAnon, hdr(), "", auth.Caller{}, nil},
		{"a bad key is refused even when anonymous is allowed", withKeysAnon, hdr("X-Api-Key", "nope"), "", auth.Caller{}, auth.ErrBadKey},
		{"auth off: no key", off, hdr(), "", auth.Caller{}, nil},
		{"auth off: a key is not checked", off, hdr("Authorization", "Bearer anything"), "", auth.Caller{}, nil},
		{"auth off: still refuses two keys", off, hdr("Authorization", "Bearer a", "X-Api-Key", "b"), "", auth.Caller{}, auth.ErrTwoKeys},
		{"no keys, no anonymous: identity only", closed, hdr(), "id", auth.Caller{Tenant: "id", Identity: "id"}, nil},
		{"no keys, no anonymous: a key cannot match", closed, hdr("X-Api-Key", "k"), "", auth.Caller{}, auth.ErrBadKey},
		{"no keys, no anonymous: nothing", closed, hdr(), "", auth.Caller{}, auth.ErrNoKey},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := tc.a.Check(tc.h, tc.identity)
			require.ErrorIs(t, err, tc.err)
			require.Equal(t, tc.want, got)
		})
	}
}

func TestNewRefusesUnusableKeys(t *testing.T) {
	t.Parallel()
	for _, k := range []string{"", "  ", "a b", "tab\tkey", "new\nline"} {
		_, err := auth.New(map[string]string{k: "t"}, false)
		require.ErrorIs(t, err, auth.ErrConfig, "%q", k)
	}
	_, err := auth.New(map[string]string{"secret key": "t"}, false)
	require.NotContains(t, err.Error(), "secret", "the error does not show the key")
}

func TestMessageHasNoPackagePrefix(t *testing.T) {
	t.Parallel()
	for _, err := range []error{auth.ErrNoKey, auth.ErrBadKey, auth.ErrTwoKeys} {
		require.NotContains(t, auth.Message(err), "auth:")
		require.NotEmpty(t, auth.Message(err))
	}
}

func TestOpenRoutes(t *testing.T) {
	t.Parallel()
	for path, open := range map[string]bool{
		"/ping": true, "/healthz": true,
		"/metrics": false, "/admin/policy": false, "/v1/models": false, "/v1/systemone": false,
		"/invocations": false, "/v1/decisions": false, "/ping/": false, "/healthz/x": false, "": false,
	} {
		require.Equal(t, open, auth.Open(path), path)
	}
}

func TestParseKeys(t *testing.T) {
	t.Parallel()
	got, err := auth.ParseKeys(" k1=acme , k2 ,,YWJj== , k3=a=b")
	require.NoError(t, err)
	require.Equal(t, map[string]string{"k1": "acme", "k2": "", "YWJj==": "", "k3=a": "b"}, got)
	_, err = auth.ParseKeys("a key")
	require.ErrorContains(t, err, "entry 1")
	_, err = auth.ParseKeys("k1,k1=t")
	require.ErrorContains(t, err, "entry 2: duplicate")
	require.NotContains(t, err.Error(), "k1")
}

func TestCheckBind(t *testing.T) {
	t.Parallel()
	for _, a := range []string{"127.0.0.1:8080", "127.1.2.3:0", "[::1]:8080", "localhost:8080"} {
		require.True(t, auth.IsLoopback(a), a)
		require.NoError(t, auth.CheckBind(a, false, false), a)
	}
	for _, a := range []string{":8080", "0.0.0.0:8080", "[::]:8080", "10.0.0.1:8080", "example.com:80", "nonsense"} {
		require.False(t, auth.IsLoopback(a), a)
		require.ErrorIs(t, auth.CheckBind(a, false, false), auth.ErrAuthRequired, a)
		require.NoError(t, auth.CheckBind(a, true, false), a)
		require.NoError(t, auth.CheckBind(a, false, true), a)
	}
}

// A key listed as KEY=TENANT:review belongs to TENANT and carries the
// review grant; other keys of the tenant do not.
func TestReviewGrant(t *testing.T) {
	keys, err := auth.ParseKeys("rev-key=acme:review,plain-key=acme,anon-rev=:review")
	require.NoError(t, err)
	a, err := auth.New(keys, false)
	require.NoError(t, err)
	for key, want := range map[string]auth.Caller{
		"rev-key":   {Tenant: "acme", Key: "rev-key", Review: true},
		"plain-key": {Tenant: "acme", Key: "plain-key"},
		"anon-rev":  {Tenant: "", Key: "anon-rev", Review: true},
	} {
		c, err := a.Check(http.Header{"X-Api-Key": {key}}, "")
		require.NoError(t, err)
		require.Equal(t, want, c, key)
	}
}
