package main

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	sqlite3 "github.com/mattn/go-sqlite3"
	_ "modernc.org/sqlite" // registers the "sqlite" driver
)

// readerConns is the size of each database's reader pool: as many connections as CPUs, at least 4 — the usual
// advice for SQLite in WAL mode behind database/sql (one writer connection, a reader pool). See README.md.
func readerConns() int { return max(4, runtimeNumCPU()) }

// dsnFor builds the database/sql data source name of path for driver `mattn` or `modernc`, with the busy timeout,
// BEGIN IMMEDIATE transactions and (modernc) the PRAGMAs as `_pragma` parameters. mattn's PRAGMAs are run by the
// ConnectHook of the driver registered in registerMattn.
func dsnFor(driver, path string, pragmas []Pragma, knobs *Knobs) string {
	q := url.Values{}
	q.Set("_txlock", "immediate")
	switch driver {
	case "mattn":
		if knobs.FullMutex {
			q.Set("_mutex", "full")
		} else {
			q.Set("_mutex", "no")
		}
		q.Set("_busy_timeout", strconv.Itoa(defaultBusyTimeoutMs))
		// mattn runs `PRAGMA synchronous = NORMAL` on every connection unless told otherwise; under
		// sqlite-default that would be the driver's opinion, so SQLite's own default (FULL) is asked for
		// instead — the profile's or the cell's value is set after it by the ConnectHook.
		if !knobs.Server {
			q.Set("_sync", "FULL")
		}
	case "modernc":
		for _, p := range pragmas {
			q.Add("_pragma", p.Name+"("+p.Value+")")
		}
	}
	return path + "?" + q.Encode()
}

var mattnDrivers atomic.Int64

// registerMattn registers a mattn driver whose ConnectHook runs pragmas on every new connection (the way a
// mattn user sets PRAGMAs its DSN has no key for, e.g. mmap_size), and returns its name.
func registerMattn(pragmas []Pragma) string {
	name := fmt.Sprintf("sqlite3-lab-%d", mattnDrivers.Add(1))
	sql.Register(name, &sqlite3.SQLiteDriver{
		ConnectHook: func(conn *sqlite3.SQLiteConn) error {
			for _, p := range pragmas {
				if _, err := conn.Exec(p.SQL(), nil); err != nil {
					return fmt.Errorf("cannot set `%s`: %w", p.SQL(), err)
				}
			}
			return nil
		},
	})
	return name
}

// openSQLDB opens a database/sql pool of at most conns connections (all kept idle, never expired) on path.
func openSQLDB(driver, path string, pragmas []Pragma, knobs *Knobs, conns int) (*sql.DB, error) {
	pragmas = withBusyTimeout(pragmas)
	var db *sql.DB
	var err error
	switch driver {
	case "mattn":
		db, err = sql.Open(registerMattn(pragmas), dsnFor(driver, path, pragmas, knobs))
	case "modernc":
		db, err = sql.Open("sqlite", dsnFor(driver, path, pragmas, knobs))
	default:
		return nil, fmt.Errorf("unknown database/sql driver %s", driver)
	}
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	db.SetConnMaxLifetime(0)
	db.SetConnMaxIdleTime(0)
	// Open every connection now, so PRAGMAs and connection set-up happen before the warm-up.
	ctx := context.Background()
	held := make([]*sql.Conn, 0, conns)
	defer func() {
		for _, c := range held {
			c.Close()
		}
	}()
	for i := 0; i < conns; i++ {
		c, err := db.Conn(ctx)
		if err != nil {
			db.Close()
			return nil, fmt.Errorf("cannot open %s: %w", path, err)
		}
		if err := c.PingContext(ctx); err != nil {
			c.Close()
			db.Close()
			return nil, fmt.Errorf("cannot open %s: %w", path, err)
		}
		held = append(held, c)
	}
	return db, nil
}

// sqlApproach is `go-mattn` / `go-modernc`: database/sql with, per database, a writer pool of one connection
// (every write, BEGIN IMMEDIATE transactions) and a reader pool; statements prepared once per pool (*sql.Stmt,
// which database/sql prepares again on each connection as needed).
type sqlApproach struct {
	writers []*sql.DB
	readers []*sql.DB

	pointRead, insert, publish, claim, ack *sql.Stmt
	joinRead                               []*sql.Stmt
	ledger                                 []map[string]*sql.Stmt // per database, on the writer
}

func openSQLApproach(driver string, cell *Cell, w Workload, knobs *Knobs) (*sqlApproach, error) {
	a := &sqlApproach{}
	pragmas := knobs.ConnectionPragmas()
	readers := readerConns()
	if w == MultiDbWorkload {
		// No more reader connections per database than its readers can use.
		per := uint64(cell.MultiDb.Readers)
		if cell.MultiDb.TotalReaders != nil {
			per = uint64(*cell.MultiDb.TotalReaders)
		}
		readers = int(max(1, min(uint64(readers), per)))
	}
	for db := 0; db < w.Databases(cell); db++ {
		path := w.DatabasePath(cell, db)
		wr, err := openSQLDB(driver, path, pragmas, knobs, 1)
		if err != nil {
			return nil, err
		}
		a.writers = append(a.writers, wr)
		rd, err := openSQLDB(driver, path, pragmas, knobs, readers)
		if err != nil {
			return nil, err
		}
		a.readers = append(a.readers, rd)
	}
	prep := func(db *sql.DB, query string) (*sql.Stmt, error) {
		s, err := db.Prepare(query)
		if err != nil {
			return nil, fmt.Errorf("cannot prepare %q: %w", query, err)
		}
		return s, nil
	}
	var err error
	switch w {
	case PointRead:
		a.pointRead, err = prep(a.readers[0], pointRead)
	case Insert:
		a.insert, err = prep(a.writers[0], insertItem)
	case Queue:
		if a.publish, err = prep(a.writers[0], publishJob); err != nil {
			return nil, err
		}
		if a.claim, err = prep(a.writers[0], claimJob); err != nil {
			return nil, err
		}
		a.ack, err = prep(a.writers[0], ackJob)
	case MultiDbWorkload:
		for db := range a.writers {
			s, err := prep(a.readers[db], accountHistory)
			if err != nil {
				return nil, err
			}
			a.joinRead = append(a.joinRead, s)
			m := map[string]*sql.Stmt{}
			for _, q := range []string{insertBlock, insertTransaction, upsertBalance} {
				if m[q], err = prep(a.writers[db], q); err != nil {
					return nil, err
				}
			}
			a.ledger = append(a.ledger, m)
		}
	}
	if err != nil {
		return nil, err
	}
	return a, nil
}

func (a *sqlApproach) PointRead(id int64) error {
	var (
		rid, value    int64
		name, payload string
	)
	return a.pointRead.QueryRow(id).Scan(&rid, &name, &value, &payload)
}

func (a *sqlApproach) Insert(item *NewItem) error {
	_, err := a.insert.Exec(item.Name, item.Value, item.Payload)
	return err
}

func (a *sqlApproach) JoinRead(db int, account int64) error {
	rows, err := a.joinRead[db].Query(account)
	if err != nil {
		return err
	}
	defer rows.Close()
	var (
		block, tx, to, amount, timestamp int64
		hash                             []byte
		balance                          sql.NullInt64
	)
	for rows.Next() {
		if err := rows.Scan(&block, &tx, &to, &amount, &hash, &timestamp, &balance); err != nil {
			return err
		}
	}
	return rows.Err()
}

func (a *sqlApproach) PacedWrite(db int, block *Block, delay time.Duration) (err error) {
	tx, err := a.writers[db].Begin() // BEGIN IMMEDIATE (_txlock=immediate)
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			_ = tx.Rollback()
		}
	}()
	for _, s := range block.Statements {
		if _, err = tx.Stmt(a.ledger[db][s.SQL]).Exec(s.Params...); err != nil {
			return err
		}
	}
	if delay > 0 {
		// The slow writer of seed 004: the delay is spent inside the transaction, holding the write lock and
		// the writer connection (a goroutine sleeps; no OS thread is held).
		time.Sleep(delay)
	}
	return tx.Commit()
}

func (a *sqlApproach) Publish(payload string, createdAt int64) error {
	_, err := a.publish.Exec(payload, createdAt)
	return err
}

func (a *sqlApproach) Claim(owner, now int64) (int64, bool, error) {
	var (
		id      int64
		payload string
	)
	err := a.claim.QueryRow(owner, now).Scan(&id, &payload)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, err
	}
	return id, true, nil
}

func (a *sqlApproach) Ack(id, owner int64) error {
	res, err := a.ack.Exec(id, owner)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n != 1 {
		return fmt.Errorf("ack deleted %d rows instead of 1 (job %d, owner %d)", n, id, owner)
	}
	return nil
}

func (a *sqlApproach) OpenDatabases() uint64 { return uint64(len(a.writers)) }

// describe fills the SQLite fields of env from one reader connection of database 0.
func (a *sqlApproach) describe(env *Environment) error {
	ctx := context.Background()
	conn, err := a.readers[0].Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if err := conn.QueryRowContext(ctx, "SELECT sqlite_version()").Scan(&env.SqliteVersion); err != nil {
		return fmt.Errorf("cannot read sqlite_version(): %w", err)
	}
	rows, err := conn.QueryContext(ctx, "PRAGMA compile_options")
	if err != nil {
		return fmt.Errorf("cannot read compile options: %w", err)
	}
	env.CompileOptions = []string{}
	for rows.Next() {
		var o string
		if err := rows.Scan(&o); err != nil {
			rows.Close()
			return err
		}
		env.CompileOptions = append(env.CompileOptions, o)
	}
	rows.Close()
	env.Pragmas = map[string]string{}
	for _, name := range reportedPragmas {
		var v any
		if err := conn.QueryRowContext(ctx, "PRAGMA "+name).Scan(&v); err != nil {
			return fmt.Errorf("cannot read PRAGMA %s: %w", name, err)
		}
		env.Pragmas[name] = pragmaText(v)
	}
	return nil
}

// pragmaText formats a PRAGMA's value as the Rust runners do (integers in decimal, text as is, NULL as "null").
func pragmaText(v any) string {
	switch x := v.(type) {
	case nil:
		return "null"
	case int64:
		return strconv.FormatInt(x, 10)
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case string:
		return x
	case []byte:
		return string(x)
	default:
		return strings.TrimSpace(fmt.Sprint(x))
	}
}

// seedSQL creates and fills database 0 of the cell through driver with every PRAGMA of the profile
// (journal_mode included), in one transaction, then closes it (folding the WAL back) — seed.rs.
func seedSQL(driver string, cell *Cell, w Workload, knobs *Knobs) error {
	path := w.DatabasePath(cell, 0)
	db, err := openSQLDB(driver, path, knobs.Pragmas(), knobs, 1)
	if err != nil {
		return fmt.Errorf("cannot create %s: %w", path, err)
	}
	defer db.Close()
	if _, err := db.Exec(w.Schema()); err != nil {
		return fmt.Errorf("cannot seed %s: %w", path, err)
	}
	tx, err := db.Begin()
	if err != nil {
		return err
	}
	stmts := map[string]*sql.Stmt{}
	err = w.SeedRows(cell, func(s Statement) error {
		st, ok := stmts[s.SQL]
		if !ok {
			var err error
			if st, err = tx.Prepare(s.SQL); err != nil {
				return err
			}
			stmts[s.SQL] = st
		}
		_, err := st.Exec(s.Params...)
		return err
	})
	if err != nil {
		_ = tx.Rollback()
		return fmt.Errorf("cannot seed %s: %w", path, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("cannot seed %s: %w", path, err)
	}
	if err := db.Close(); err != nil {
		return fmt.Errorf("cannot close %s after seeding: %w", path, err)
	}
	return nil
}
