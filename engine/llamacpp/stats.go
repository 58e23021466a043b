package llamacpp

// Stats are cumulative counters of an Engine.
type Stats struct {
	Decisions       int64 `json:"decisions"`        // decisions scored
	Batches         int64 `json:"batches"`          // llama_decode calls
	TokensSubmitted int64 `json:"tokens_submitted"` // prompt tokens of all decisions
	TokensEvaluated int64 `json:"tokens_evaluated"` // tokens actually decoded
	PrefixHits      int64 `json:"prefix_hits"`      // decisions that reused a cached prefix
	PrefixMisses    int64 `json:"prefix_misses"`    // decisions that found none
	TokensSaved     int64 `json:"tokens_saved"`     // prompt tokens not decoded thanks to reuse
	DecodeNanos     int64 `json:"decode_ns"`        // time inside llama_decode
	Pending         int64 `json:"pending"`          // decisions waiting now
	Busy            int64 `json:"busy"`             // Score calls refused with ErrBusy
	CacheHostBytes  int64 `json:"cache_host_bytes"` // host memory holding cached prefixes now (host store)
	CacheMoveNanos  int64 `json:"cache_move_ns"`    // time spent saving and restoring cached prefixes (host store)
}
