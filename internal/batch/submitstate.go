package batch

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/verdict-dev/verdict/decision"
)

// submitFormat names the state file's format (its first line).
const submitFormat = "verdict-submit/1"

// StatePath is the state file Submit keeps beside an output file.
func StatePath(out string) string { return out + ".submit.jsonl" }

// SubmitPlan is what decides how a file is cut into chunks; a resumed run
// must cut it the same way, so it is kept in the state file.
type SubmitPlan struct {
	Window        int `json:"window"`
	Chunk         int `json:"chunk"`
	ChunkBytes    int `json:"chunk_bytes"`
	MaxLineBytes  int `json:"max_line_bytes"`
	MaxStateBytes int `json:"max_state_bytes"`
}

// submitHeader is the first line of the state file: which file was sent
// where, and how it was cut.
type submitHeader struct {
	Format string     `json:"format"`
	URL    string     `json:"url"`
	SHA256 string     `json:"input_sha256"`
	Bytes  int64      `json:"input_bytes"`
	Plan   SubmitPlan `json:"plan"`
}

// submitEntry is one later line of the state file: a chunk the front door
// accepted (RequestID) or refused for its content (Error), or, with
// Complete, the end of the submit stage (Chunk is then the number of
// chunks).
type submitEntry struct {
	Chunk     int             `json:"chunk"`
	Key       string          `json:"key,omitempty"`
	Lines     [2]int          `json:"lines"`
	Decisions int             `json:"decisions,omitempty"`
	RequestID string          `json:"request_id,omitempty"`
	Error     *decision.Error `json:"error,omitempty"`
	Complete  bool            `json:"complete,omitempty"`
}

// submitState is the state file: a header written atomically (temporary
// file and rename), then one line appended and synced per submitted
// chunk, so a crash loses at most the line being written, and a resumed
// run never sends a chunk it recorded. A torn last line is dropped on
// resume, as Resume does for the output.
type submitState struct {
	path     string
	header   submitHeader
	chunks   map[int]submitEntry
	complete bool
	total    int // chunks of the file, once complete
	f        *os.File
}

// createState starts a new state file at path, replacing any old one.
func createState(path string, h submitHeader) (*submitState, error) {
	h.Format = submitFormat
	b, err := json.Marshal(h)
	if err != nil {
		return nil, err
	}
	tmp, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return nil, err
	}
	_, err = tmp.Write(append(b, '\n'))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		_ = os.Remove(tmp.Name())
		return nil, err
	}
	syncDir(filepath.Dir(path))
	return openState(path, h, nil, false, int64(len(b)+1))
}

func openState(path string, h submitHeader, chunks map[int]submitEntry, complete bool, keep int64) (*submitState, error) {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, err
	}
	if err := truncate(f, keep); err != nil {
		f.Close()
		return nil, err
	}
	if chunks == nil {
		chunks = map[int]submitEntry{}
	}
	return &submitState{path: path, header: h, chunks: chunks, complete: complete, f: f}, nil
}

// loadState reads the state file at path for a resumed run, or returns
// nil, nil when there is none. It drops a torn last line.
func loadState(path string) (*submitState, error) {
	f, err := os.Open(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	defer f.Close()
	lr := NewLineReader(f, 1<<24)
	var (
		h        submitHeader
		keep     int64
		complete bool
		total    int
		chunks   = map[int]submitEntry{}
	)
	for n := 0; ; n++ {
		l, err := lr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return nil, err
		}
		whole := lr.Offset()-keep == l.Len+1
		if n == 0 {
			if !whole || json.Unmarshal(l.Data, &h) != nil || h.Format != submitFormat {
				return nil, fmt.Errorf("%s is not a verdict batch --submit state file (%s)", path, submitFormat)
			}
		} else {
			var e submitEntry
			if !whole || json.Unmarshal(l.Data, &e) != nil {
				break // torn by a crash: that chunk is sent again, with the same Idempotency-Key
			}
			if e.Complete {
				complete, total = true, e.Chunk
			} else {
				chunks[e.Chunk] = e
			}
		}
		keep = lr.Offset()
	}
	st, err := openState(path, h, chunks, complete, keep)
	if st != nil {
		st.total = total
	}
	return st, err
}

// record appends one entry and syncs it.
func (s *submitState) record(e submitEntry) error {
	b, err := json.Marshal(e)
	if err != nil {
		return err
	}
	if _, err := s.f.Write(append(b, '\n')); err != nil {
		return fmt.Errorf("state file %s: %w", s.path, err)
	}
	if err := s.f.Sync(); err != nil {
		return fmt.Errorf("state file %s: %w", s.path, err)
	}
	if e.Complete {
		s.complete, s.total = true, e.Chunk
	} else {
		s.chunks[e.Chunk] = e
	}
	return nil
}

func (s *submitState) Close() error { return s.f.Close() }

// syncDir makes a rename in dir durable; a failure only weakens that.
func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
}
