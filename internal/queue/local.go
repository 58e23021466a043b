package queue

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/verdict-dev/verdict/internal/sqlite"
)

// LocalConfig configures a Local queue. The zero value of a field means its
// default, given in the field's comment.
type LocalConfig struct {
	// Path is the SQLite file; it is created when missing. Required.
	Path string
	// Name is the queue's name within the file; one file holds any number
	// of queues. Defaults to "default".
	Name string
	// Visibility is the visibility timeout used when Receive does not give
	// one. Defaults to 30 s.
	Visibility time.Duration
	// MaxReceives is how many receives a message gets; a message that
	// becomes visible again after that many goes to the dead-letter table
	// instead of being returned (like SQS's maxReceiveCount). Defaults to 5.
	MaxReceives int
	// DedupWindow is how long a DedupID suppresses a second message with
	// the same id. Defaults to 5 min.
	DedupWindow time.Duration
	// PollInterval is how often a waiting Receive looks for messages sent
	// by other processes (sends in this process wake it at once). Defaults
	// to 100 ms.
	PollInterval time.Duration
	// NowFunc is the queue's clock: visibility timeouts, send times and the
	// dedup window are read from it, so a test can let time pass without
	// waiting (queuetest.Clock). Long polls wait in real time. The clock
	// is this process's: other processes sharing the file use their own.
	// Defaults to time.Now.
	NowFunc func() time.Time
}

// withDefaults fills the fields left zero. It runs after validate.
func (c LocalConfig) withDefaults() LocalConfig {
	if c.Name == "" {
		c.Name = "default"
	}
	if c.Visibility == 0 {
		c.Visibility = 30 * time.Second
	}
	if c.MaxReceives == 0 {
		c.MaxReceives = 5
	}
	if c.DedupWindow == 0 {
		c.DedupWindow = 5 * time.Minute
	}
	if c.PollInterval == 0 {
		c.PollInterval = 100 * time.Millisecond
	}
	if c.NowFunc == nil {
		c.NowFunc = time.Now
	}
	return c
}

// validate checks the configuration as given (zero: the default).
func (c LocalConfig) validate() error {
	switch {
	case c.Path == "":
		return fmt.Errorf("%w: LocalConfig.Path is required", ErrConfig)
	case c.Visibility < 0 || c.Visibility > MaxVisibility:
		return fmt.Errorf("%w: LocalConfig.Visibility must be 0..12h (0: 30s), got %v", ErrConfig, c.Visibility)
	case c.MaxReceives < 0:
		return fmt.Errorf("%w: LocalConfig.MaxReceives must be >= 1 (0: 5), got %d", ErrConfig, c.MaxReceives)
	case c.DedupWindow < 0:
		return fmt.Errorf("%w: LocalConfig.DedupWindow must be >= 0 (0: 5m), got %v", ErrConfig, c.DedupWindow)
	case c.PollInterval < 0:
		return fmt.Errorf("%w: LocalConfig.PollInterval must be >= 0 (0: 100ms), got %v", ErrConfig, c.PollInterval)
	}
	return nil
}

// Local is a durable queue in a SQLite file (WAL journal, synchronous
// commits): a message acknowledged by Send survives a kill -9 of the
// process. Several processes may open the same file.
//
// Local behaves like a standard SQS queue (GroupID is stored and returned
// but does not order delivery).
type Local struct {
	cfg    LocalConfig
	db     *sql.DB
	mu     sync.Mutex
	notify chan struct{} // closed and replaced by every Send
	closed chan struct{}
	once   sync.Once
	dead   atomic.Int64
}

const localSchema = `
CREATE TABLE IF NOT EXISTS messages (
	id         INTEGER PRIMARY KEY AUTOINCREMENT,
	queue      TEXT    NOT NULL,
	body       BLOB    NOT NULL,
	attrs      TEXT    NOT NULL DEFAULT '',
	group_id   TEXT    NOT NULL DEFAULT '',
	sent_at    INTEGER NOT NULL,
	visible_at INTEGER NOT NULL,
	receives   INTEGER NOT NULL DEFAULT 0,
	receipt    TEXT    NOT NULL DEFAULT ''
);
CREATE INDEX IF NOT EXISTS messages_ready ON messages (queue, visible_at, id);
CREATE TABLE IF NOT EXISTS dead_letters (
	id       INTEGER PRIMARY KEY,
	queue    TEXT    NOT NULL,
	body     BLOB    NOT NULL,
	attrs    TEXT    NOT NULL DEFAULT '',
	group_id TEXT    NOT NULL DEFAULT '',
	sent_at  INTEGER NOT NULL,
	receives INTEGER NOT NULL,
	dead_at  INTEGER NOT NULL
);
CREATE TABLE IF NOT EXISTS dedup (
	queue      TEXT    NOT NULL,
	dedup_id   TEXT    NOT NULL,
	expires_at INTEGER NOT NULL,
	PRIMARY KEY (queue, dedup_id)
) WITHOUT ROWID;
`

// OpenLocal opens (creating when needed) the queue cfg.Name in cfg.Path.
func OpenLocal(cfg LocalConfig) (*Local, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	db, err := sqlite.Open(cfg.Path)
	if err != nil {
		return nil, err
	}
	if _, err := db.Exec(localSchema); err != nil {
		db.Close()
		return nil, fmt.Errorf("queue: create schema in %s: %w", cfg.Path, err)
	}
	return &Local{cfg: cfg, db: db, notify: make(chan struct{}), closed: make(chan struct{})}, nil
}

// Name returns the queue's name.
func (q *Local) Name() string { return q.cfg.Name }

// Close closes the file. Waiting Receives return ErrClosed.
func (q *Local) Close() error {
	var err error
	q.once.Do(func() {
		close(q.closed)
		err = sqlite.Close(q.db)
	})
	return err
}

func (q *Local) isClosed() bool {
	select {
	case <-q.closed:
		return true
	default:
		return false
	}
}

func (q *Local) nowMillis() int64 { return q.cfg.NowFunc().UnixMilli() }

func newToken() string {
	var b [8]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Send enqueues up to 10 messages in one durable transaction. A message
// whose DedupID was sent within the dedup window is accepted and dropped.
func (q *Local) Send(ctx context.Context, msgs []Outgoing) ([]error, error) {
	if err := checkBatch(len(msgs)); err != nil {
		return nil, err
	}
	if q.isClosed() {
		return nil, ErrClosed
	}
	errs := make([]error, len(msgs))
	for i, m := range msgs {
		if len(m.Body) == 0 {
			errs[i] = errors.New("queue: message body is empty")
		} else if len(m.Body) > MaxMessageBytes {
			errs[i] = fmt.Errorf("%w: %d bytes", ErrTooLarge, len(m.Body))
		}
	}
	ctx, cancel, err := sqlite.CallContext(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	tx, err := q.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("queue: send: %w", err)
	}
	defer tx.Rollback()
	now := q.nowMillis()
	if _, err := tx.ExecContext(ctx, `DELETE FROM dedup WHERE queue = ? AND expires_at <= ?`, q.cfg.Name, now); err != nil {
		return nil, fmt.Errorf("queue: send: %w", err)
	}
	for i, m := range msgs {
		if errs[i] != nil {
			continue
		}
		if m.DedupID != "" {
			res, err := tx.ExecContext(ctx, `INSERT OR IGNORE INTO dedup (queue, dedup_id, expires_at) VALUES (?, ?, ?)`,
				q.cfg.Name, m.DedupID, now+q.cfg.DedupWindow.Milliseconds())
			if err != nil {
				return nil, fmt.Errorf("queue: send: %w", err)
			}
			if n, _ := res.RowsAffected(); n == 0 {
				continue // a duplicate within the window: accepted, not stored
			}
		}
		attrs := ""
		if len(m.Attributes) > 0 {
			b, _ := json.Marshal(m.Attributes)
			attrs = string(b)
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO messages (queue, body, attrs, group_id, sent_at, visible_at) VALUES (?, ?, ?, ?, ?, ?)`,
			q.cfg.Name, m.Body, attrs, m.GroupID, now, now); err != nil {
			return nil, fmt.Errorf("queue: send: %w", err)
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("queue: send: %w", err)
	}
	q.wake()
	return errs, nil
}

func (q *Local) wake() {
	q.mu.Lock()
	close(q.notify)
	q.notify = make(chan struct{})
	q.mu.Unlock()
}

func (q *Local) waitChan() <-chan struct{} {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.notify
}

// Receive returns up to opts.Max visible messages and hides them for the
// visibility timeout, waiting up to opts.Wait for the first one.
func (q *Local) Receive(ctx context.Context, opts ReceiveOptions) ([]Message, error) {
	opts, err := opts.resolve(q.cfg.Visibility)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(opts.Wait)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		if q.isClosed() {
			return nil, ErrClosed
		}
		wake := q.waitChan()
		msgs, err := q.tryReceive(ctx, opts)
		if err != nil || len(msgs) > 0 {
			return msgs, err
		}
		left := time.Until(deadline)
		if left <= 0 {
			return nil, nil
		}
		if q.cfg.PollInterval > 0 && left > q.cfg.PollInterval {
			left = q.cfg.PollInterval
		}
		t := time.NewTimer(left)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil, ctx.Err()
		case <-q.closed:
			t.Stop()
			return nil, ErrClosed
		case <-wake:
			t.Stop()
		case <-t.C:
		}
	}
}

func (q *Local) tryReceive(ctx context.Context, opts ReceiveOptions) ([]Message, error) {
	ctx, cancel, err := sqlite.CallContext(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	tx, err := q.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, q.wrap("receive", err)
	}
	defer tx.Rollback()
	now := q.nowMillis()
	var out []Message
	var dead int64
	for len(out) < opts.Max {
		rows, err := tx.QueryContext(ctx, `SELECT id, body, attrs, group_id, sent_at, receives FROM messages
			WHERE queue = ? AND visible_at <= ? ORDER BY visible_at, id LIMIT ?`, q.cfg.Name, now, opts.Max-len(out))
		if err != nil {
			return nil, q.wrap("receive", err)
		}
		var batch []Message
		for rows.Next() {
			var m Message
			var id, sent int64
			var attrs string
			if err := rows.Scan(&id, &m.Body, &attrs, &m.GroupID, &sent, &m.ReceiveCount); err != nil {
				rows.Close()
				return nil, q.wrap("receive", err)
			}
			m.ID = strconv.FormatInt(id, 10)
			m.SentAt = time.UnixMilli(sent)
			if attrs != "" {
				if err := json.Unmarshal([]byte(attrs), &m.Attributes); err != nil {
					rows.Close()
					return nil, fmt.Errorf("queue: receive: message %d attributes: %w", id, err)
				}
			}
			batch = append(batch, m)
		}
		rows.Close()
		if err := rows.Err(); err != nil {
			return nil, q.wrap("receive", err)
		}
		if len(batch) == 0 {
			break
		}
		for _, m := range batch {
			if m.ReceiveCount >= q.cfg.MaxReceives {
				if _, err := tx.ExecContext(ctx, `INSERT OR REPLACE INTO dead_letters (id, queue, body, attrs, group_id, sent_at, receives, dead_at)
					SELECT id, queue, body, attrs, group_id, sent_at, receives, ? FROM messages WHERE id = ?`, now, m.ID); err != nil {
					return nil, q.wrap("dead-letter", err)
				}
				if _, err := tx.ExecContext(ctx, `DELETE FROM messages WHERE id = ?`, m.ID); err != nil {
					return nil, q.wrap("dead-letter", err)
				}
				dead++
				continue
			}
			m.ReceiveCount++
			m.Receipt = m.ID + "." + newToken()
			if _, err := tx.ExecContext(ctx, `UPDATE messages SET receives = ?, receipt = ?, visible_at = ? WHERE id = ?`,
				m.ReceiveCount, m.Receipt, now+opts.Visibility.Milliseconds(), m.ID); err != nil {
				return nil, q.wrap("receive", err)
			}
			out = append(out, m)
		}
	}
	if len(out) == 0 && dead == 0 {
		return nil, nil // nothing written
	}
	if err := tx.Commit(); err != nil {
		return nil, q.wrap("receive", err)
	}
	q.dead.Add(dead)
	return out, nil
}

func (q *Local) wrap(op string, err error) error {
	if q.isClosed() {
		return ErrClosed
	}
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return fmt.Errorf("queue: %s %s: %w", op, q.cfg.Name, err)
}

func splitReceipt(r string) (int64, bool) {
	id, _, ok := strings.Cut(r, ".")
	if !ok {
		return 0, false
	}
	n, err := strconv.ParseInt(id, 10, 64)
	return n, err == nil
}

// Delete removes held messages. A receipt that no longer matches (the
// message was deleted or received again) fails with ErrStaleReceipt.
func (q *Local) Delete(ctx context.Context, receipts []string) ([]error, error) {
	if err := checkBatch(len(receipts)); err != nil {
		return nil, err
	}
	return q.perReceipt(ctx, "delete", len(receipts), func(tx *sql.Tx, i int) (sql.Result, error) {
		id, ok := splitReceipt(receipts[i])
		if !ok {
			return nil, badEntry{fmt.Errorf("queue: malformed receipt %q", receipts[i])}
		}
		return tx.ExecContext(ctx, `DELETE FROM messages WHERE id = ? AND receipt = ?`, id, receipts[i])
	})
}

// ChangeVisibility sets new visibility timeouts for held messages.
func (q *Local) ChangeVisibility(ctx context.Context, vs []Visibility) ([]error, error) {
	if err := checkBatch(len(vs)); err != nil {
		return nil, err
	}
	now := q.nowMillis()
	res, err := q.perReceipt(ctx, "change visibility", len(vs), func(tx *sql.Tx, i int) (sql.Result, error) {
		id, ok := splitReceipt(vs[i].Receipt)
		if !ok {
			return nil, badEntry{fmt.Errorf("queue: malformed receipt %q", vs[i].Receipt)}
		}
		if vs[i].Timeout < 0 || vs[i].Timeout > MaxVisibility {
			return nil, badEntry{fmt.Errorf("queue: visibility timeout must be 0..12h, got %v", vs[i].Timeout)}
		}
		return tx.ExecContext(ctx, `UPDATE messages SET visible_at = ? WHERE id = ? AND receipt = ?`,
			now+vs[i].Timeout.Milliseconds(), id, vs[i].Receipt)
	})
	if err == nil {
		for i, v := range vs {
			if res[i] == nil && v.Timeout == 0 {
				q.wake()
				break
			}
		}
	}
	return res, err
}

// badEntry marks a per-entry error of a batch call (as opposed to a
// failure of the whole call).
type badEntry struct{ error }

func (q *Local) perReceipt(ctx context.Context, op string, n int, f func(*sql.Tx, int) (sql.Result, error)) ([]error, error) {
	if q.isClosed() {
		return nil, ErrClosed
	}
	ctx, cancel, err := sqlite.CallContext(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	tx, err := q.db.BeginTx(ctx, nil)
	if err != nil {
		return nil, q.wrap(op, err)
	}
	defer tx.Rollback()
	errs := make([]error, n)
	for i := 0; i < n; i++ {
		res, err := f(tx, i)
		if err != nil {
			var bad badEntry
			if !errors.As(err, &bad) {
				return nil, q.wrap(op, err)
			}
			errs[i] = bad.error
			continue
		}
		if k, _ := res.RowsAffected(); k == 0 {
			errs[i] = ErrStaleReceipt
		}
	}
	if err := tx.Commit(); err != nil {
		return nil, q.wrap(op, err)
	}
	return errs, nil
}

// LocalStats counts a local queue's messages.
type LocalStats struct {
	// Visible messages are waiting to be received.
	Visible int
	// InFlight messages are held by a consumer (hidden).
	InFlight int
	// Dead messages are in the dead-letter table.
	Dead int
}

// Stats counts the queue's messages now.
func (q *Local) Stats(ctx context.Context) (LocalStats, error) {
	var s LocalStats
	ctx, cancel, err := sqlite.CallContext(ctx)
	if err != nil {
		return s, err
	}
	defer cancel()
	now := q.nowMillis()
	err = q.db.QueryRowContext(ctx, `SELECT
		(SELECT count(*) FROM messages WHERE queue = ?1 AND visible_at <= ?2),
		(SELECT count(*) FROM messages WHERE queue = ?1 AND visible_at > ?2),
		(SELECT count(*) FROM dead_letters WHERE queue = ?1)`, q.cfg.Name, now).Scan(&s.Visible, &s.InFlight, &s.Dead)
	if err != nil {
		return s, q.wrap("stats", err)
	}
	return s, nil
}

// DeadLettered counts the messages this Local moved to the dead-letter
// table since it was opened.
func (q *Local) DeadLettered() int64 { return q.dead.Load() }

// DeadLetters returns the messages in the dead-letter table, oldest first
// (their Receipt is empty).
func (q *Local) DeadLetters(ctx context.Context) ([]Message, error) {
	ctx, cancel, err := sqlite.CallContext(ctx)
	if err != nil {
		return nil, err
	}
	defer cancel()
	rows, err := q.db.QueryContext(ctx, `SELECT id, body, attrs, group_id, sent_at, receives FROM dead_letters WHERE queue = ? ORDER BY id`, q.cfg.Name)
	if err != nil {
		return nil, q.wrap("dead letters", err)
	}
	defer rows.Close()
	var out []Message
	for rows.Next() {
		var m Message
		var id, sent int64
		var attrs string
		if err := rows.Scan(&id, &m.Body, &attrs, &m.GroupID, &sent, &m.ReceiveCount); err != nil {
			return nil, q.wrap("dead letters", err)
		}
		m.ID = strconv.FormatInt(id, 10)
		m.SentAt = time.UnixMilli(sent)
		if attrs != "" {
			_ = json.Unmarshal([]byte(attrs), &m.Attributes)
		}
		out = append(out, m)
	}
	return out, rows.Err()
}

// Redrive moves every dead letter back to the queue with a fresh receive
// count, returning how many moved.
func (q *Local) Redrive(ctx context.Context) (int, error) {
	ctx, cancel, err := sqlite.CallContext(ctx)
	if err != nil {
		return 0, err
	}
	defer cancel()
	tx, err := q.db.BeginTx(ctx, nil)
	if err != nil {
		return 0, q.wrap("redrive", err)
	}
	defer tx.Rollback()
	now := q.nowMillis()
	res, err := tx.ExecContext(ctx, `INSERT INTO messages (queue, body, attrs, group_id, sent_at, visible_at)
		SELECT queue, body, attrs, group_id, sent_at, ? FROM dead_letters WHERE queue = ? ORDER BY id`, now, q.cfg.Name)
	if err != nil {
		return 0, q.wrap("redrive", err)
	}
	if _, err := tx.ExecContext(ctx, `DELETE FROM dead_letters WHERE queue = ?`, q.cfg.Name); err != nil {
		return 0, q.wrap("redrive", err)
	}
	if err := tx.Commit(); err != nil {
		return 0, q.wrap("redrive", err)
	}
	n, _ := res.RowsAffected()
	q.wake()
	return int(n), nil
}

// Check runs SQLite's integrity check on the file.
func (q *Local) Check(ctx context.Context) error {
	ctx, cancel, err := sqlite.CallContext(ctx)
	if err != nil {
		return err
	}
	defer cancel()
	var s string
	if err := q.db.QueryRowContext(ctx, `PRAGMA integrity_check`).Scan(&s); err != nil {
		return q.wrap("integrity check", err)
	}
	if s != "ok" {
		return fmt.Errorf("queue: integrity check of %s: %s", q.cfg.Path, s)
	}
	return nil
}
