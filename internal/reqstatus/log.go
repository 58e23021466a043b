package reqstatus

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/verdict-dev/verdict/internal/sqlite"
	"github.com/verdict-dev/verdict/lambda"
)

// Log remembers accepted requests (requests.db) so that their status
// can be told while their results are not stored yet, across restarts.
type Log struct{ db *sql.DB }

const schema = `
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

// OpenLog opens (creating if needed) the request log at path.
func OpenLog(path string) (*Log, error) {
	db, err := sqlite.Open(path)
	if err != nil {
		return nil, err
	}
	if _, err := db.Exec(schema); err != nil {
		db.Close()
		return nil, fmt.Errorf("requests log %s: %w", path, err)
	}
	return &Log{db: db}, nil
}

// Close closes the log.
func (l *Log) Close() error { return sqlite.Close(l.db) }

// Record is the front door's RecordFunc: it runs once the request is
// enqueued. A retried request (same Idempotency-Key) is recorded once.
func (l *Log) Record(ctx context.Context, c lambda.Caller, a *lambda.Accepted) error {
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
		a.RequestID, c.Tenant, a.Model, time.Now().UnixMilli()); err != nil {
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

type logged struct {
	tenant, model string
	acceptedAt    time.Time
	decisions     []string
}

// get returns a logged request, or found=false.
func (l *Log) get(ctx context.Context, id string) (logged, bool, error) {
	var r logged
	ctx, cancel, err := sqlite.CallContext(ctx)
	if err != nil {
		return r, false, err
	}
	defer cancel()
	var ms int64
	err = l.db.QueryRowContext(ctx, `SELECT tenant, model, accepted_at FROM requests WHERE request_id = ?`, id).Scan(&r.tenant, &r.model, &ms)
	if errors.Is(err, sql.ErrNoRows) {
		return r, false, nil
	} else if err != nil {
		return r, false, err
	}
	r.acceptedAt = time.UnixMilli(ms).UTC()
	rows, err := l.db.QueryContext(ctx, `SELECT decision_id FROM request_decisions WHERE request_id = ? ORDER BY position`, id)
	if err != nil {
		return r, false, err
	}
	defer rows.Close()
	for rows.Next() {
		var d string
		if err := rows.Scan(&d); err != nil {
			return r, false, err
		}
		r.decisions = append(r.decisions, d)
	}
	return r, true, rows.Err()
}

// requestsOf lists the requests holding a decision id, oldest first.
func (l *Log) requestsOf(ctx context.Context, decisionID string) ([]string, error) {
	ctx, cancel, err := sqlite.CallContext(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	rows, err := l.db.QueryContext(ctx, `SELECT d.request_id FROM request_decisions d JOIN requests r USING (request_id)
		WHERE d.decision_id = ? ORDER BY r.accepted_at, d.request_id`, decisionID)
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
