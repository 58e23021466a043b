// Package router decides where a decision runs and which decisions travel
// together. It is pure: no I/O, no clocks.
//
// Choose picks the worker pool (cpu or gpu) for a set of decisions that
// share a state: an explicit route wins, then interactive priority, then the
// estimated prompt length against a threshold; if the chosen pool has no
// queue configured, the other one is used.
//
// GroupKey names a state: the hex sha256 of its canonical bytes. The front
// door puts decisions with the same key into one message (and uses the key
// as the FIFO MessageGroupId); the worker merges decisions with the same key
// across received messages into one engine call so the state is prefilled
// once.
package router
