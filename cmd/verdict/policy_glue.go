package main

import (
	"fmt"

	"github.com/verdict-dev/verdict/decision"
)

// loadPolicyFunc loads a policy file for offline scoring; "" means none.
func loadPolicyFunc(path string) (applyFunc, error) {
	if path == "" {
		return nil, nil
	}
	return nil, fmt.Errorf("flag --policy: policy support is not built yet (%s)", path)
}

var _ = decision.StatusDecided
