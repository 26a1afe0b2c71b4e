package main

/*
// mattn/go-sqlite3 compiles the SQLite amalgamation into this binary; these are its C symbols.
extern int sqlite3_config(int, ...);
extern void *sqlite3_malloc(int);
extern void sqlite3_free(void *);
extern long long sqlite3_memory_used(void);

static int lab_mattn_memstatus(int on) { return sqlite3_config(9, on); } // 9: SQLITE_CONFIG_MEMSTATUS

static long long lab_mattn_memory_used(void) {
	void *p = sqlite3_malloc(256);
	long long used = sqlite3_memory_used();
	sqlite3_free(p);
	return used;
}
*/
import "C"

import (
	"fmt"

	"modernc.org/libc"
	lib "modernc.org/sqlite/lib"
)

// configureMemstatus sets SQLITE_CONFIG_MEMSTATUS on the SQLite the approach links (mattn's C amalgamation, or
// modernc's transpiled SQLite, which zombiezen uses too) before the process's first connection; returns SQLite's
// code (SQLITE_MISUSE once SQLite has initialised).
func configureMemstatus(approach string, on bool) int {
	v := 0
	if on {
		v = 1
	}
	if approach == "go-mattn" {
		return int(C.lab_mattn_memstatus(C.int(v)))
	}
	tls := libc.NewTLS()
	defer tls.Close()
	va := libc.NewVaList(int32(v))
	defer libc.Xfree(tls, va)
	return int(lib.Xsqlite3_config(tls, lib.SQLITE_CONFIG_MEMSTATUS, va))
}

// memstatusOutcome is the Rust runners' `memstatus_outcome`: whether memory statistics are actually on (a live
// sqlite3_malloc shows in sqlite3_memory_used only when they are), with the evidence.
func memstatusOutcome(approach string, requestedOn bool, rc int) string {
	var used int64
	if approach == "go-mattn" {
		used = int64(C.lab_mattn_memory_used())
	} else {
		tls := libc.NewTLS()
		p := lib.Xsqlite3_malloc(tls, 256)
		used = lib.Xsqlite3_memory_used(tls)
		lib.Xsqlite3_free(tls, p)
		tls.Close()
	}
	state := "off"
	if used > 0 {
		state = "on"
	}
	req := "off"
	if requestedOn {
		req = "on"
	}
	rcText := fmt.Sprint(rc)
	switch rc {
	case 0:
		rcText = "SQLITE_OK"
	case 21:
		rcText = "SQLITE_MISUSE (SQLite was already initialised)"
	}
	v := 0
	if requestedOn {
		v = 1
	}
	return fmt.Sprintf("%s (requested %s: sqlite3_config(SQLITE_CONFIG_MEMSTATUS, %d) returned %s; "+
		"sqlite3_memory_used() = %d with 256 bytes allocated)", state, req, v, rcText, used)
}
