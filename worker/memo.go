package worker

import "sync"

// publishMemoSize bounds the messages a worker remembers publishes for.
const publishMemoSize = 4096

// memoReply stands for the reply webhook in a publishMemo (sinks are
// their index in Config.Sinks).
const memoReply = -1

// publishMemo remembers, per message id, which sinks have accepted (or
// refused for good) the message's records, so that a message released
// after one sink failed transiently — a webhook that answers 503 — and
// received again by this worker does not publish a second copy to the
// sinks that already have it: at least once, not once per attempt. It is a
// bounded memory of this process (the oldest entries go first); another
// worker, or this one after a restart, publishes again, and consumers drop
// those duplicates by key.
type publishMemo struct {
	mu    sync.Mutex
	size  int
	sinks map[string]map[int]bool
	order []string // message ids, oldest first (may hold forgotten ids)
}

func newPublishMemo(size int) *publishMemo {
	return &publishMemo{size: size, sinks: map[string]map[int]bool{}}
}

func (m *publishMemo) has(id string, sink int) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sinks[id][sink]
}

func (m *publishMemo) add(id string, sink int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	s, ok := m.sinks[id]
	if !ok {
		for len(m.sinks) >= m.size && len(m.order) > 0 {
			delete(m.sinks, m.order[0])
			m.order = m.order[1:]
		}
		s = map[int]bool{}
		m.sinks[id] = s
		m.order = append(m.order, id)
	}
	s[sink] = true
}

// forget drops a message that was deleted.
func (m *publishMemo) forget(id string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	delete(m.sinks, id)
	if len(m.order) > 2*m.size {
		kept := m.order[:0]
		for _, o := range m.order {
			if _, ok := m.sinks[o]; ok {
				kept = append(kept, o)
			}
		}
		m.order = kept
	}
}
