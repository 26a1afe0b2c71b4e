package main

import (
	"context"
	"fmt"
	"time"

	"zombiezen.com/go/sqlite"
	"zombiezen.com/go/sqlite/sqlitex"
)

// zombieFlags are the open flags of every zombiezen connection: no OpenWAL (the library's default turns WAL on,
// which is the profile's business), and the cell's mutex mode — which zombiezen overrides: it always opens
// with SQLITE_OPEN_NOMUTEX (sqlite.go, OpenConn), so `fullmutex` cannot apply (logged).
func zombieFlags(knobs *Knobs) sqlite.OpenFlags {
	f := sqlite.OpenReadWrite | sqlite.OpenCreate | sqlite.OpenURI
	if knobs.FullMutex {
		f |= sqlite.OpenFullMutex
	} else {
		f |= sqlite.OpenNoMutex
	}
	return f
}

func zombieApply(conn *sqlite.Conn, pragmas []Pragma) error {
	for _, p := range pragmas {
		if err := sqlitex.ExecuteTransient(conn, p.SQL(), nil); err != nil {
			return fmt.Errorf("cannot set `%s`: %w", p.SQL(), err)
		}
	}
	return nil
}

// openZombiePool opens a sqlitex.Pool of size connections on path whose PrepareConn sets the PRAGMAs, and takes
// every connection once so that happens before the warm-up.
func openZombiePool(path string, pragmas []Pragma, knobs *Knobs, size int) (*sqlitex.Pool, error) {
	pragmas = withBusyTimeout(pragmas)
	pool, err := sqlitex.NewPool(path, sqlitex.PoolOptions{
		Flags:       zombieFlags(knobs),
		PoolSize:    size,
		PrepareConn: func(conn *sqlite.Conn) error { return zombieApply(conn, pragmas) },
	})
	if err != nil {
		return nil, fmt.Errorf("cannot open %s: %w", path, err)
	}
	ctx := context.Background()
	held := make([]*sqlite.Conn, 0, size)
	for i := 0; i < size; i++ {
		c, err := pool.Take(ctx)
		if err != nil {
			for _, c := range held {
				pool.Put(c)
			}
			pool.Close()
			return nil, fmt.Errorf("cannot open %s: %w", path, err)
		}
		held = append(held, c)
	}
	for _, c := range held {
		pool.Put(c)
	}
	return pool, nil
}

// zombieApproach is `go-zombiezen`: zombiezen.com/go/sqlite with, per database, a sqlitex.Pool of one
// connection for the writes and a sqlitex.Pool for the reads; statements through the connection's cache
// (Conn.Prepare).
type zombieApproach struct {
	writers []*sqlitex.Pool
	readers []*sqlitex.Pool
}

func openZombieApproach(cell *Cell, w Workload, knobs *Knobs) (*zombieApproach, error) {
	a := &zombieApproach{}
	pragmas := knobs.ConnectionPragmas()
	readers := readerConns()
	if w == MultiDbWorkload {
		per := uint64(cell.MultiDb.Readers)
		if cell.MultiDb.TotalReaders != nil {
			per = uint64(*cell.MultiDb.TotalReaders)
		}
		readers = int(max(1, min(uint64(readers), per)))
	}
	for db := 0; db < w.Databases(cell); db++ {
		path := w.DatabasePath(cell, db)
		wr, err := openZombiePool(path, pragmas, knobs, 1)
		if err != nil {
			return nil, err
		}
		a.writers = append(a.writers, wr)
		rd, err := openZombiePool(path, pragmas, knobs, readers)
		if err != nil {
			return nil, err
		}
		a.readers = append(a.readers, rd)
	}
	return a, nil
}

var bg = context.Background()

func (a *zombieApproach) PointRead(id int64) error {
	conn, err := a.readers[0].Take(bg)
	if err != nil {
		return err
	}
	defer a.readers[0].Put(conn)
	stmt, err := conn.Prepare(pointRead)
	if err != nil {
		return err
	}
	defer stmt.Reset()
	stmt.BindInt64(1, id)
	row, err := stmt.Step()
	if err != nil {
		return err
	}
	if !row {
		return fmt.Errorf("no item %d", id)
	}
	_, _, _, _ = stmt.ColumnInt64(0), stmt.ColumnText(1), stmt.ColumnInt64(2), stmt.ColumnText(3)
	return nil
}

// stepDone steps a statement that returns no row, then resets it.
func stepDone(stmt *sqlite.Stmt) error {
	_, err := stmt.Step()
	if rerr := stmt.Reset(); err == nil && rerr != nil {
		err = rerr
	}
	return err
}

func (a *zombieApproach) Insert(item *NewItem) error {
	conn, err := a.writers[0].Take(bg)
	if err != nil {
		return err
	}
	defer a.writers[0].Put(conn)
	stmt, err := conn.Prepare(insertItem)
	if err != nil {
		return err
	}
	stmt.BindText(1, item.Name)
	stmt.BindInt64(2, item.Value)
	stmt.BindText(3, item.Payload)
	return stepDone(stmt)
}

func (a *zombieApproach) JoinRead(db int, account int64) error {
	conn, err := a.readers[db].Take(bg)
	if err != nil {
		return err
	}
	defer a.readers[db].Put(conn)
	stmt, err := conn.Prepare(accountHistory)
	if err != nil {
		return err
	}
	defer stmt.Reset()
	stmt.BindInt64(1, account)
	for {
		row, err := stmt.Step()
		if err != nil {
			return err
		}
		if !row {
			return nil
		}
		_, _, _, _ = stmt.ColumnInt64(0), stmt.ColumnInt64(1), stmt.ColumnInt64(2), stmt.ColumnInt64(3)
		hash := make([]byte, stmt.ColumnLen(4))
		stmt.ColumnBytes(4, hash)
		_ = stmt.ColumnInt64(5)
		if !stmt.ColumnIsNull(6) {
			_ = stmt.ColumnInt64(6)
		}
	}
}

func bindParams(stmt *sqlite.Stmt, params []Param) error {
	for i, p := range params {
		switch v := p.(type) {
		case int64:
			stmt.BindInt64(i+1, v)
		case string:
			stmt.BindText(i+1, v)
		case []byte:
			stmt.BindBytes(i+1, v)
		default:
			return fmt.Errorf("unsupported parameter type %T", p)
		}
	}
	return nil
}

func (a *zombieApproach) PacedWrite(db int, block *Block, delay time.Duration) (err error) {
	conn, err := a.writers[db].Take(bg)
	if err != nil {
		return err
	}
	defer a.writers[db].Put(conn)
	end, err := sqlitex.ImmediateTransaction(conn)
	if err != nil {
		return err
	}
	defer end(&err)
	for _, s := range block.Statements {
		stmt, err := conn.Prepare(s.SQL)
		if err != nil {
			return err
		}
		if err := bindParams(stmt, s.Params); err != nil {
			return err
		}
		if err := stepDone(stmt); err != nil {
			return err
		}
	}
	if delay > 0 {
		// Seed 004's slow writer: the delay inside the transaction (a goroutine sleeping; no OS thread held).
		time.Sleep(delay)
	}
	return nil
}

func (a *zombieApproach) Publish(payload string, createdAt int64) error {
	conn, err := a.writers[0].Take(bg)
	if err != nil {
		return err
	}
	defer a.writers[0].Put(conn)
	stmt, err := conn.Prepare(publishJob)
	if err != nil {
		return err
	}
	stmt.BindText(1, payload)
	stmt.BindInt64(2, createdAt)
	return stepDone(stmt)
}

func (a *zombieApproach) Claim(owner, now int64) (id int64, ok bool, err error) {
	conn, err := a.writers[0].Take(bg)
	if err != nil {
		return 0, false, err
	}
	defer a.writers[0].Put(conn)
	stmt, err := conn.Prepare(claimJob)
	if err != nil {
		return 0, false, err
	}
	stmt.BindInt64(1, owner)
	stmt.BindInt64(2, now)
	row, err := stmt.Step()
	if err != nil {
		stmt.Reset()
		return 0, false, err
	}
	if row {
		id = stmt.ColumnInt64(0)
		_ = stmt.ColumnText(1)
		// Step to the end, so the UPDATE completes before the reset.
		if _, err = stmt.Step(); err != nil {
			stmt.Reset()
			return 0, false, err
		}
	}
	if err := stmt.Reset(); err != nil {
		return 0, false, err
	}
	return id, row, nil
}

func (a *zombieApproach) Ack(id, owner int64) error {
	conn, err := a.writers[0].Take(bg)
	if err != nil {
		return err
	}
	defer a.writers[0].Put(conn)
	stmt, err := conn.Prepare(ackJob)
	if err != nil {
		return err
	}
	stmt.BindInt64(1, id)
	stmt.BindInt64(2, owner)
	if err := stepDone(stmt); err != nil {
		return err
	}
	if n := conn.Changes(); n != 1 {
		return fmt.Errorf("ack deleted %d rows instead of 1 (job %d, owner %d)", n, id, owner)
	}
	return nil
}

func (a *zombieApproach) OpenDatabases() uint64 { return uint64(len(a.writers)) }

func (a *zombieApproach) describe(env *Environment) error {
	conn, err := a.readers[0].Take(bg)
	if err != nil {
		return err
	}
	defer a.readers[0].Put(conn)
	return zombieDescribe(conn, env)
}

func zombieDescribe(conn *sqlite.Conn, env *Environment) error {
	err := sqlitex.ExecuteTransient(conn, "SELECT sqlite_version()", &sqlitex.ExecOptions{
		ResultFunc: func(stmt *sqlite.Stmt) error { env.SqliteVersion = stmt.ColumnText(0); return nil },
	})
	if err != nil {
		return fmt.Errorf("cannot read sqlite_version(): %w", err)
	}
	env.CompileOptions = []string{}
	err = sqlitex.ExecuteTransient(conn, "PRAGMA compile_options", &sqlitex.ExecOptions{
		ResultFunc: func(stmt *sqlite.Stmt) error {
			env.CompileOptions = append(env.CompileOptions, stmt.ColumnText(0))
			return nil
		},
	})
	if err != nil {
		return fmt.Errorf("cannot read compile options: %w", err)
	}
	env.Pragmas = map[string]string{}
	for _, name := range reportedPragmas {
		err := sqlitex.ExecuteTransient(conn, "PRAGMA "+name, &sqlitex.ExecOptions{
			ResultFunc: func(stmt *sqlite.Stmt) error {
				var v any
				switch stmt.ColumnType(0) {
				case sqlite.TypeNull:
					v = nil
				case sqlite.TypeInteger:
					v = stmt.ColumnInt64(0)
				case sqlite.TypeFloat:
					v = stmt.ColumnFloat(0)
				default:
					v = stmt.ColumnText(0)
				}
				env.Pragmas[name] = pragmaText(v)
				return nil
			},
		})
		if err != nil {
			return fmt.Errorf("cannot read PRAGMA %s: %w", name, err)
		}
	}
	return nil
}

// seedZombie is seedSQL with zombiezen: one connection with every PRAGMA, schema, rows in one transaction, close.
func seedZombie(cell *Cell, w Workload, knobs *Knobs) (err error) {
	path := w.DatabasePath(cell, 0)
	conn, err := sqlite.OpenConn(path, zombieFlags(knobs))
	if err != nil {
		return fmt.Errorf("cannot create %s: %w", path, err)
	}
	defer func() {
		if cerr := conn.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("cannot close %s after seeding: %w", path, cerr)
		}
	}()
	if err := zombieApply(conn, withBusyTimeout(knobs.Pragmas())); err != nil {
		return err
	}
	if err := sqlitex.ExecuteScript(conn, w.Schema(), nil); err != nil {
		return fmt.Errorf("cannot seed %s: %w", path, err)
	}
	if err := sqlitex.ExecuteTransient(conn, "BEGIN", nil); err != nil {
		return err
	}
	err = w.SeedRows(cell, func(s Statement) error {
		stmt, err := conn.Prepare(s.SQL)
		if err != nil {
			return err
		}
		if err := bindParams(stmt, s.Params); err != nil {
			return err
		}
		return stepDone(stmt)
	})
	if err != nil {
		_ = sqlitex.ExecuteTransient(conn, "ROLLBACK", nil)
		return fmt.Errorf("cannot seed %s: %w", path, err)
	}
	if err := sqlitex.ExecuteTransient(conn, "COMMIT", nil); err != nil {
		return fmt.Errorf("cannot seed %s: %w", path, err)
	}
	return nil
}
