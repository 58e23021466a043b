package decision_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/verdict-dev/verdict/decision"
)

// sentinels are the three error classes every error of the package matches
// exactly one of.
var sentinels = []error{decision.ErrMalformed, decision.ErrInvalid, decision.ErrTooLarge}

// requireClass checks that err matches want and no other sentinel.
func requireClass(t testing.TB, err, want error) {
	t.Helper()
	require.Error(t, err)
	for _, s := range sentinels {
		require.Equal(t, s == want, errors.Is(err, s), "errors.Is(%v, %v)", err, s)
	}
}

// requireOneClass checks that err matches exactly one sentinel.
func requireOneClass(t testing.TB, err error) {
	t.Helper()
	n := 0
	for _, s := range sentinels {
		if errors.Is(err, s) {
			n++
		}
	}
	require.Equal(t, 1, n, "error %q matches %d sentinels", err, n)
	require.NotEmpty(t, err.Error())
}

// fieldErrors returns the field errors of a *ValidationError.
func fieldErrors(t testing.TB, err error) []decision.FieldError {
	t.Helper()
	var ve *decision.ValidationError
	require.ErrorAs(t, err, &ve)
	require.NotEmpty(t, ve.Errors)
	return ve.Errors
}

// paths returns the field paths of a *ValidationError, in report order.
func paths(t testing.TB, err error) []string {
	t.Helper()
	fes := fieldErrors(t, err)
	out := make([]string, len(fes))
	for i, fe := range fes {
		out[i] = fe.Path
	}
	return out
}

// messageAt returns the message reported for path.
func messageAt(t testing.TB, err error, path string) string {
	t.Helper()
	for _, fe := range fieldErrors(t, err) {
		if fe.Path == path {
			return fe.Message
		}
	}
	t.Fatalf("no error at %q in %v", path, err)
	return ""
}

// opts returns n option objects o0..o{n-1}.
func opts(n int) []any {
	out := make([]any, n)
	for i := range out {
		out[i] = map[string]any{"id": fmt.Sprintf("o%d", i), "description": fmt.Sprintf("Option %d.", i)}
	}
	return out
}

// semif builds a bare, valid SemIf decision and applies mods to it.
func semif(mods ...func(m map[string]any)) map[string]any {
	m := map[string]any{
		"id":       "support-route",
		"state":    "Customer asks to reset a forgotten password.",
		"question": "Which queue should handle this request?",
		"options": []any{
			map[string]any{"id": "account_access", "description": "Account access."},
			map[string]any{"id": "billing", "description": "Billing."},
			map[string]any{"id": "sales", "description": "Sales."},
		},
	}
	for _, mod := range mods {
		mod(m)
	}
	return m
}

// set returns a mod that sets key to v (or deletes it when v is deleted).
func set(key string, v any) func(map[string]any) {
	return func(m map[string]any) {
		if v == deleted {
			delete(m, key)
			return
		}
		m[key] = v
	}
}

// setOpt returns a mod that sets field key of option i (or deletes it).
func setOpt(i int, key string, v any) func(map[string]any) {
	return func(m map[string]any) {
		o := m["options"].([]any)[i].(map[string]any)
		if v == deleted {
			delete(o, key)
			return
		}
		o[key] = v
	}
}

type deletedT struct{}

var deleted = deletedT{}

func mustJSON(t testing.TB, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	require.NoError(t, err)
	return b
}

// normalize makes a decision comparable after a JSON round trip: an empty
// metadata map and a missing one are the same.
func normalize(d decision.Decision) decision.Decision {
	if len(d.Metadata) == 0 {
		d.Metadata = nil
	}
	return d
}

// rawJSON embeds literal JSON (duplicate keys included) in a body built
// with json.Marshal.
type rawJSON string

func (r rawJSON) MarshalJSON() ([]byte, error) { return []byte(r), nil }
