package results

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/verdict-dev/verdict/decision"
	"github.com/verdict-dev/verdict/internal/sink"
	"github.com/verdict-dev/verdict/internal/sqlite"
)

// File is a results file (results.db): the records keyed by request id +
// decision id, first copy kept (a redelivery publishes the same bytes,
// which are ignored), the inputs of decisions sent to review, and the
// answers callers gave. It is the sink `verdict worker --results-store`
// and `verdict up` write. Safe for concurrent use and for several
// processes on one file.
type File struct {
	db   *sql.DB
	path string
	now  func() time.Time
}

const fileSchema = `
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
CREATE TABLE IF NOT EXISTS reviews (
	request_id  TEXT    NOT NULL,
	decision_id TEXT    NOT NULL,
	tenant      TEXT    NOT NULL DEFAULT '',
	input       BLOB    NOT NULL,
	stored_at   INTEGER NOT NULL,
	open        INTEGER NOT NULL DEFAULT 1,
	PRIMARY KEY (request_id, decision_id)
);
CREATE INDEX IF NOT EXISTS reviews_open ON reviews (tenant, open, stored_at, request_id, decision_id);
CREATE TABLE IF NOT EXISTS feedback (
	seq         INTEGER PRIMARY KEY,
	request_id  TEXT    NOT NULL,
	decision_id TEXT    NOT NULL,
	tenant      TEXT    NOT NULL DEFAULT '',
	body        BLOB    NOT NULL,
	at          INTEGER NOT NULL
);
CREATE INDEX IF NOT EXISTS feedback_decision ON feedback (request_id, decision_id, seq);
CREATE INDEX IF NOT EXISTS feedback_tenant ON feedback (tenant, at);
`

// OpenFile opens (creating when needed) the results file at path.
func OpenFile(path string) (*File, error) {
	if path == "" {
		return nil, fmt.Errorf("%w: results file path is required", sink.ErrConfig)
	}
	db, err := sqlite.Open(path)
	if err != nil {
		return nil, err
	}
	if _, err := db.Exec(fileSchema); err != nil {
		sqlite.Close(db)
		return nil, fmt.Errorf("results: create schema in %s: %w", path, err)
	}
	return &File{db: db, path: path, now: time.Now}, nil
}

// Close closes the file.
func (f *File) Close() error { return sqlite.Close(f.db) }

// Name is "store".
func (f *File) Name() string { return "store" }

// Publish stores the records in one transaction, keeping existing copies.
// A first copy whose outcome is review opens a review with its input.
func (f *File) Publish(ctx context.Context, recs []sink.Record) error {
	ctx, cancel, err := sqlite.CallContext(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	tx, err := f.db.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("results: store: %w", err)
	}
	defer tx.Rollback()
	now := f.now().UnixMilli()
	for i := range recs {
		r := &recs[i]
		body, err := r.Marshal()
		if err != nil {
			return fmt.Errorf("%w: %w", sink.ErrPermanent, err)
		}
		res, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO results (request_id, decision_id, tenant, status, body, stored_at)
			VALUES (?, ?, ?, ?, ?, ?)`, r.RequestID, r.DecisionID, r.Tenant, string(r.Status), body, now)
		if err != nil {
			return fmt.Errorf("results: store %s: %w", r.Key(), err)
		}
		if n, _ := res.RowsAffected(); n == 0 || !reviewOpen(r) {
			continue // a later copy, or no review
		}
		input, err := json.Marshal(r.Input)
		if err != nil {
			return fmt.Errorf("%w: %w", sink.ErrPermanent, err)
		}
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO reviews (request_id, decision_id, tenant, input, stored_at)
			VALUES (?, ?, ?, ?, ?)`, r.RequestID, r.DecisionID, r.Tenant, input, now); err != nil {
			return fmt.Errorf("results: store review %s: %w", r.Key(), err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("results: store: %w", err)
	}
	return nil
}

// Stored is one record in a results store.
type Stored struct {
	// Record is the decoded record.
	Record sink.Record
	// Body is the exact published bytes.
	Body []byte
	// StoredAt is when the first copy was stored.
	StoredAt time.Time
}

func (f *File) query(ctx context.Context, where string, args ...any) ([]Stored, error) {
	ctx, cancel, err := sqlite.CallContext(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	rows, err := f.db.QueryContext(ctx, `SELECT body, stored_at FROM results WHERE `+where+` ORDER BY stored_at, rowid`, args...)
	if err != nil {
		return nil, fmt.Errorf("results: lookup: %w", err)
	}
	defer rows.Close()
	var out []Stored
	for rows.Next() {
		var st Stored
		var ms int64
		if err := rows.Scan(&st.Body, &ms); err != nil {
			return nil, fmt.Errorf("results: lookup: %w", err)
		}
		if err := json.Unmarshal(st.Body, &st.Record); err != nil {
			return nil, fmt.Errorf("results: stored record is corrupt: %w", err)
		}
		st.StoredAt = time.UnixMilli(ms)
		out = append(out, st)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("results: lookup: %w", err)
	}
	return out, nil
}

// ByRequest returns a request's records in the order they were stored
// (empty when none is stored yet).
func (f *File) ByRequest(ctx context.Context, requestID string) ([]Stored, error) {
	return f.query(ctx, `request_id = ?`, requestID)
}

// ByDecision returns every record with this decision id (decision ids are
// the caller's and may repeat across requests), oldest first.
func (f *File) ByDecision(ctx context.Context, decisionID string) ([]Stored, error) {
	return f.query(ctx, `decision_id = ?`, decisionID)
}

// Get returns one record, or ErrNotFound.
func (f *File) Get(ctx context.Context, requestID, decisionID string) (Stored, error) {
	out, err := f.query(ctx, `request_id = ? AND decision_id = ?`, requestID, decisionID)
	if err != nil {
		return Stored{}, err
	}
	if len(out) == 0 {
		return Stored{}, fmt.Errorf("%w: %s/%s", ErrNotFound, requestID, decisionID)
	}
	return out[0], nil
}

// All returns every stored record, oldest first.
func (f *File) All(ctx context.Context) ([]Stored, error) {
	return f.query(ctx, `1 = 1`)
}

// Count returns the number of stored records.
func (f *File) Count(ctx context.Context) (int, error) {
	ctx, cancel, err := sqlite.CallContext(ctx)
	if err != nil {
		return 0, err
	}
	defer cancel()
	var n int
	if err := f.db.QueryRowContext(ctx, `SELECT count(*) FROM results`).Scan(&n); err != nil {
		return 0, fmt.Errorf("results: count: %w", err)
	}
	return n, nil
}

// Label records fb unless it repeats the decision's current label, and
// closes the decision's review; it returns the answers oldest first.
func (f *File) Label(ctx context.Context, fb Feedback) ([]Feedback, bool, error) {
	ctx, cancel, err := sqlite.CallContext(ctx)
	if err != nil {
		return nil, false, err
	}
	defer cancel()
	tx, err := f.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, false, fmt.Errorf("results: feedback: %w", err)
	}
	defer tx.Rollback()
	history, err := labels(ctx, tx, fb.RequestID, fb.DecisionID)
	if err != nil {
		return nil, false, err
	}
	if replays(history, fb) {
		return history, true, nil
	}
	body, err := json.Marshal(fb)
	if err != nil {
		return nil, false, err
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO feedback (request_id, decision_id, tenant, body, at) VALUES (?, ?, ?, ?, ?)`,
		fb.RequestID, fb.DecisionID, fb.Tenant, body, fb.At.UnixMilli()); err != nil {
		return nil, false, fmt.Errorf("results: feedback: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `UPDATE reviews SET open = 0 WHERE request_id = ? AND decision_id = ?`, fb.RequestID, fb.DecisionID); err != nil {
		return nil, false, fmt.Errorf("results: feedback: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, false, fmt.Errorf("results: feedback: %w", err)
	}
	return append(history, fb), false, nil
}

// Labels returns a decision's answers, oldest first.
func (f *File) Labels(ctx context.Context, requestID, decisionID string) ([]Feedback, error) {
	ctx, cancel, err := sqlite.CallContext(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	return labels(ctx, f.db, requestID, decisionID)
}

type querier interface {
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
}

func labels(ctx context.Context, q querier, requestID, decisionID string) ([]Feedback, error) {
	rows, err := q.QueryContext(ctx, `SELECT body FROM feedback WHERE request_id = ? AND decision_id = ? ORDER BY seq`, requestID, decisionID)
	if err != nil {
		return nil, fmt.Errorf("results: feedback: %w", err)
	}
	defer rows.Close()
	var out []Feedback
	for rows.Next() {
		var body []byte
		var fb Feedback
		if err := rows.Scan(&body); err != nil {
			return nil, fmt.Errorf("results: feedback: %w", err)
		}
		if err := json.Unmarshal(body, &fb); err != nil {
			return nil, fmt.Errorf("results: stored feedback is corrupt: %w", err)
		}
		out = append(out, fb)
	}
	return out, rows.Err()
}

// Reviews lists tenant's open reviews, oldest first, limit at most (and
// at most MaxReviewsPage), after cursor; next is "" after the last page.
// Each page is one indexed query: memory stays bounded whatever the
// inbox holds.
func (f *File) Reviews(ctx context.Context, tenant, cursor string, limit int) ([]Review, string, error) {
	after, err := parseCursor(cursor)
	if err != nil {
		return nil, "", err
	}
	limit = min(max(limit, 1), MaxReviewsPage)
	ctx, cancel, err := sqlite.CallContext(ctx)
	if err != nil {
		return nil, "", err
	}
	defer cancel()
	rows, err := f.db.QueryContext(ctx, `SELECT v.request_id, v.decision_id, v.input, v.stored_at, r.body, r.stored_at
		FROM reviews v JOIN results r USING (request_id, decision_id)
		WHERE v.tenant = ? AND v.open = 1 AND (v.stored_at, v.request_id, v.decision_id) > (?, ?, ?)
		ORDER BY v.stored_at, v.request_id, v.decision_id LIMIT ?`,
		tenant, after.at, after.requestID, after.decisionID, limit+1)
	if err != nil {
		return nil, "", fmt.Errorf("results: reviews: %w", err)
	}
	defer rows.Close()
	var page []Review
	for rows.Next() {
		var rv Review
		var reqID, decID string
		var input []byte
		var at, storedAt int64
		if err := rows.Scan(&reqID, &decID, &input, &at, &rv.Stored.Body, &storedAt); err != nil {
			return nil, "", fmt.Errorf("results: reviews: %w", err)
		}
		if len(page) == limit {
			return page, cursorAfter(page[len(page)-1]), rows.Err()
		}
		if err := json.Unmarshal(input, &rv.Input); err != nil {
			return nil, "", fmt.Errorf("results: stored review input is corrupt: %w", err)
		}
		if err := json.Unmarshal(rv.Stored.Body, &rv.Stored.Record); err != nil {
			return nil, "", fmt.Errorf("results: stored record is corrupt: %w", err)
		}
		rv.Stored.StoredAt = time.UnixMilli(storedAt)
		page = append(page, rv)
	}
	return page, "", rows.Err()
}

// EachLabeled calls fn with each decision f picks and its current label,
// in the order of their labels.
func (f *File) EachLabeled(ctx context.Context, flt LabelFilter, fn func(Labeled) error) error {
	from, to := int64(0), int64(1<<62)
	if !flt.From.IsZero() {
		from = flt.From.UnixMilli()
	}
	if !flt.To.IsZero() {
		to = flt.To.UnixMilli()
	}
	// One query per page of labels, so that memory stays bounded; the
	// latest answer of each decision is its label.
	seq := int64(0)
	for {
		ctx2, cancel, err := sqlite.CallContext(ctx)
		if err != nil {
			return err
		}
		rows, err := f.db.QueryContext(ctx2, `SELECT f.seq, f.body, r.body, r.stored_at FROM feedback f
			JOIN results r USING (request_id, decision_id)
			WHERE f.tenant = ? AND f.at >= ? AND f.at < ? AND f.seq > ?
			  AND f.seq = (SELECT max(seq) FROM feedback g WHERE g.request_id = f.request_id AND g.decision_id = f.decision_id)
			ORDER BY f.seq LIMIT 500`, flt.Tenant, from, to, seq)
		if err != nil {
			cancel()
			return fmt.Errorf("results: labeled: %w", err)
		}
		var page []Labeled
		for rows.Next() {
			var l Labeled
			var fbBody []byte
			var storedAt int64
			if err := rows.Scan(&seq, &fbBody, &l.Stored.Body, &storedAt); err != nil {
				rows.Close()
				cancel()
				return fmt.Errorf("results: labeled: %w", err)
			}
			if json.Unmarshal(fbBody, &l.Label) != nil || json.Unmarshal(l.Stored.Body, &l.Stored.Record) != nil {
				rows.Close()
				cancel()
				return errors.New("results: a stored label or record is corrupt")
			}
			l.Stored.StoredAt = time.UnixMilli(storedAt)
			page = append(page, l)
		}
		err = rows.Err()
		rows.Close()
		cancel()
		if err != nil {
			return fmt.Errorf("results: labeled: %w", err)
		}
		for _, l := range page {
			if flt.Kind != "" && l.Stored.Record.Result.Kind != flt.Kind {
				continue
			}
			if err := fn(l); err != nil {
				return err
			}
		}
		if len(page) < 500 {
			return nil
		}
	}
}

// reviewCursor is the position after a review in the inbox's order.
type reviewCursor struct {
	at                    int64
	requestID, decisionID string
}

func cursorAfter(r Review) string {
	b, _ := json.Marshal([]string{strconv.FormatInt(r.Stored.StoredAt.UnixMilli(), 10), r.Stored.Record.RequestID, r.Stored.Record.DecisionID})
	return encodeCursor(b)
}

func parseCursor(s string) (reviewCursor, error) {
	if s == "" {
		return reviewCursor{at: -1}, nil
	}
	b, err := decodeCursor(s)
	var parts []string
	if err == nil {
		err = json.Unmarshal(b, &parts)
	}
	if err != nil || len(parts) != 3 {
		return reviewCursor{}, &InputError{Fields: []decision.FieldError{{Path: "cursor", Message: "is not a cursor this inbox gave"}}}
	}
	at, err := strconv.ParseInt(parts[0], 10, 64)
	if err != nil {
		return reviewCursor{}, &InputError{Fields: []decision.FieldError{{Path: "cursor", Message: "is not a cursor this inbox gave"}}}
	}
	return reviewCursor{at: at, requestID: parts[1], decisionID: parts[2]}, nil
}
