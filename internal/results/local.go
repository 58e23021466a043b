package results

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"time"

	"github.com/verdict-dev/verdict/internal/sqlite"
)

// Local is the store of `verdict up`: the result records in results.db
// (File, which the worker publishes to) and the accepted requests
// in requests.db, both in one directory. Safe for concurrent use and for
// several processes on the same files.
type Local struct {
	*File
	db *sql.DB // requests.db
}

const localSchema = `
CREATE TABLE IF NOT EXISTS requests (
	request_id  TEXT    PRIMARY KEY,
	tenant      TEXT    NOT NULL DEFAULT '',
	model       TEXT    NOT NULL DEFAULT '',
	accepted_at INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS request_decisions (
	request_id  TEXT    NOT NULL,
	decision_id TEXT    NOT NULL,
	position    INTEGER NOT NULL,
	route       TEXT    NOT NULL DEFAULT '',
	PRIMARY KEY (request_id, decision_id)
);
CREATE INDEX IF NOT EXISTS request_decisions_decision ON request_decisions (decision_id);
`

// OpenLocal opens (creating when needed) dir/results.db and
// dir/requests.db.
func OpenLocal(dir string) (*Local, error) {
	store, err := OpenFile(filepath.Join(dir, "results.db"))
	if err != nil {
		return nil, err
	}
	path := filepath.Join(dir, "requests.db")
	db, err := sqlite.Open(path)
	if err == nil {
		if _, err = db.Exec(localSchema); err != nil {
			sqlite.Close(db)
			err = fmt.Errorf("results: create schema in %s: %w", path, err)
		}
	}
	if err != nil {
		store.Close()
		return nil, err
	}
	return &Local{File: store, db: db}, nil
}

// Close closes both files.
func (l *Local) Close() error {
	return errors.Join(sqlite.Close(l.db), l.File.Close())
}

// Accept records an accepted request once: recording it again keeps the
// first copy.
func (l *Local) Accept(ctx context.Context, a Accepted) error {
	ctx, cancel, err := sqlite.CallContext(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	tx, err := l.db.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO requests (request_id, tenant, model, accepted_at) VALUES (?, ?, ?, ?)`,
		a.RequestID, a.Tenant, a.Model, a.AcceptedAt.UnixMilli()); err != nil {
		return err
	}
	for i, d := range a.Decisions {
		if _, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO request_decisions (request_id, decision_id, position, route) VALUES (?, ?, ?, ?)`,
			a.RequestID, d.ID, i, d.Route); err != nil {
			return err
		}
	}
	return tx.Commit()
}

// Request returns the accepted request and its stored records.
func (l *Local) Request(ctx context.Context, requestID string) (Entry, error) {
	a, err := l.accepted(ctx, requestID)
	if err != nil {
		return Entry{}, err
	}
	recs, err := l.ByRequest(ctx, requestID)
	if err != nil {
		return Entry{}, err
	}
	return Entry{Accepted: a, Records: recs}, nil
}

// accepted reads an accepted request, or nil.
func (l *Local) accepted(ctx context.Context, id string) (*Accepted, error) {
	ctx, cancel, err := sqlite.CallContext(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	a := Accepted{RequestID: id}
	var ms int64
	err = l.db.QueryRowContext(ctx, `SELECT tenant, model, accepted_at FROM requests WHERE request_id = ?`, id).Scan(&a.Tenant, &a.Model, &ms)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	a.AcceptedAt = time.UnixMilli(ms).UTC()
	rows, err := l.db.QueryContext(ctx, `SELECT decision_id, route FROM request_decisions WHERE request_id = ? ORDER BY position`, id)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var d AcceptedDecision
		if err := rows.Scan(&d.ID, &d.Route); err != nil {
			return nil, err
		}
		a.Decisions = append(a.Decisions, d)
	}
	return &a, rows.Err()
}

// RequestsOf lists tenant's requests holding decisionID: the accepted
// ones oldest first, then those known only by a stored record.
func (l *Local) RequestsOf(ctx context.Context, tenant, decisionID string) ([]string, error) {
	ids, err := l.acceptedWith(ctx, tenant, decisionID)
	if err != nil {
		return nil, err
	}
	stored, err := l.ByDecision(ctx, decisionID)
	if err != nil {
		return nil, err
	}
	seen := map[string]bool{}
	for _, id := range ids {
		seen[id] = true
	}
	for _, s := range stored {
		if s.Record.Tenant == tenant && !seen[s.Record.RequestID] {
			seen[s.Record.RequestID] = true
			ids = append(ids, s.Record.RequestID)
		}
	}
	return ids, nil
}

func (l *Local) acceptedWith(ctx context.Context, tenant, decisionID string) ([]string, error) {
	ctx, cancel, err := sqlite.CallContext(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	rows, err := l.db.QueryContext(ctx, `SELECT d.request_id FROM request_decisions d JOIN requests r USING (request_id)
		WHERE d.decision_id = ? AND r.tenant = ? ORDER BY r.accepted_at, d.request_id`, decisionID, tenant)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, err
		}
		out = append(out, id)
	}
	return out, rows.Err()
}
