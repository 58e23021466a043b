package main

import (
	"github.com/verdict-dev/verdict/policy"
)

// loadPolicy loads a policy file for offline scoring; "" means none.
func loadPolicy(path string) (*policy.Policy, error) {
	if path == "" {
		return nil, nil
	}
	return policy.Load(path)
}
