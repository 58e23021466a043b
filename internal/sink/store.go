package sink

import (
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"time"

	"github.com/verdict-dev/verdict/internal/sqlite"
)

// Store is the local results store: one SQLite table keyed by request id +
// decision id that keeps the first copy of each record (a redelivery
// publishes the same bytes, which are ignored). Safe for concurrent use and
// for several processes on one file.
type Store struct {
	db   *sql.DB
	path string
}

const storeSchema = `
CREATE TABLE IF NOT EXISTS results (
	request_id  TEXT    NOT NULL,
	decision_id TEXT    NOT NULL,
	tenant      TEXT    NOT NULL DEFAULT '',
	status      TEXT    NOT NULL,
	body        BLOB    NOT NULL,
	stored_at   INTEGER NOT NULL,
	PRIMARY KEY (request_id, decision_id)
);
CREATE INDEX IF NOT EXISTS results_decision ON results (decision_id);
`

// OpenStore opens (creating when needed) the results store at path.
func OpenStore(path string) (*Store, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: store path is required", ErrConfig)
	}
	db, err := sqlite.Open(path)
	if err != nil {
		return nil, err
	}
	if _, err := db.Exec(storeSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("sink: create store schema in %s: %w", path, err)
	}
	return &Store{db: db, path: path}, nil
}

// Close closes the file.
func (s *Store) Close() error { return sqlite.Close(s.db) }

// Name is "store".
func (s *Store) Name() string { return "store" }

// Publish stores the records in one transaction, keeping existing copies.
func (s *Store) Publish(ctx context.Context, recs []Record) error {
	ctx, cancel, err := sqlite.CallContext(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	tx, err := s.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("sink: store: %w", err)
	}
	defer tx.Rollback()
	now := time.Now().UnixMilli()
	for i := range recs {
		body, err := recs[i].Marshal()
		if err != nil {
			return fmt.Errorf("%w: %w", ErrPermanent, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO results (request_id, decision_id, tenant, status, body, stored_at)
			VALUES (?, ?, ?, ?, ?, ?)`, recs[i].RequestID, recs[i].DecisionID, recs[i].Tenant, string(recs[i].Status), body, now); err != nil {
			return fmt.Errorf("sink: store %s: %w", recs[i].Key(), err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("sink: store: %w", err)
	}
	return nil
}

// Stored is one record in the store.
type Stored struct {
	// Record is the decoded record.
	Record Record
	// Body is the exact published bytes.
	Body []byte
	// StoredAt is when the first copy was stored.
	StoredAt time.Time
}

func (s *Store) query(ctx context.Context, where string, args ...any) ([]Stored, error) {
	ctx, cancel, err := sqlite.CallContext(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	rows, err := s.db.QueryContext(ctx, `SELECT body, stored_at FROM results WHERE `+where+` ORDER BY stored_at, rowid`, args...)
	if err != nil {
		return nil, fmt.Errorf("sink: store lookup: %w", err)
	}
	defer rows.Close()
	var out []Stored
	for rows.Next() {
		var st Stored
		var ms int64
		if err := rows.Scan(&st.Body, &ms); err != nil {
			return nil, fmt.Errorf("sink: store lookup: %w", err)
		}
		if err := json.Unmarshal(st.Body, &st.Record); err != nil {
			return nil, fmt.Errorf("sink: store: stored record is corrupt: %w", err)
		}
		st.StoredAt = time.UnixMilli(ms)
		out = append(out, st)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("sink: store lookup: %w", err)
	}
	return out, nil
}

// ByRequest returns a request's records in the order they were stored
// (empty when none is stored yet).
func (s *Store) ByRequest(ctx context.Context, requestID string) ([]Stored, error) {
	return s.query(ctx, `request_id = ?`, requestID)
}

// ByDecision returns every record with this decision id (decision ids are
// the caller's and may repeat across requests), oldest first.
func (s *Store) ByDecision(ctx context.Context, decisionID string) ([]Stored, error) {
	return s.query(ctx, `decision_id = ?`, decisionID)
}

// Get returns one record, or ErrNotFound.
func (s *Store) Get(ctx context.Context, requestID, decisionID string) (Stored, error) {
	out, err := s.query(ctx, `request_id = ? AND decision_id = ?`, requestID, decisionID)
	if err != nil {
		return Stored{}, err
	}
	if len(out) == 0 {
		return Stored{}, fmt.Errorf("%w: %s/%s", ErrNotFound, requestID, decisionID)
	}
	return out[0], nil
}

// All returns every stored record, oldest first.
func (s *Store) All(ctx context.Context) ([]Stored, error) {
	return s.query(ctx, `1 = 1`)
}

// Count returns the number of stored records.
func (s *Store) Count(ctx context.Context) (int, error) {
	ctx, cancel, err := sqlite.CallContext(ctx)
	if err != nil {
		return 0, err
	}
	defer cancel()
	var n int
	if err := s.db.QueryRowContext(ctx, `SELECT count(*) FROM results`).Scan(&n); err != nil {
		return 0, fmt.Errorf("sink: store count: %w", err)
	}
	return n, nil
}
