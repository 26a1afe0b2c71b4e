package main

import (
	"fmt"
	"strconv"
	"strings"
)

// Pragma is one `PRAGMA name = value` (lab-core's knobs.rs).
type Pragma struct {
	Name          string
	Value         string
	PerConnection bool
}

// SQL is the statement text, `PRAGMA name = value`.
func (p Pragma) SQL() string { return "PRAGMA " + p.Name + " = " + p.Value }

// serverPragmas is SERVER_PRAGMAS, in the order they are applied.
var serverPragmas = []Pragma{
	{"journal_mode", "WAL", false},
	{"synchronous", "NORMAL", true},
	{"busy_timeout", "5000", true},
	{"foreign_keys", "ON", true},
	{"cache_size", "-32000", true},
	{"mmap_size", "268435456", true},
	{"temp_store", "MEMORY", true},
	{"journal_size_limit", "67108864", true},
}

// reportedPragmas is REPORTED_PRAGMAS.
var reportedPragmas = []string{
	"journal_mode", "synchronous", "busy_timeout", "foreign_keys", "cache_size", "mmap_size", "temp_store",
	"journal_size_limit",
}

// defaultBusyTimeoutMs is the busy timeout every connection gets even under `sqlite-default`: rusqlite (and so
// every Rust approach) and mattn set 5 s by default, and the sqlx runner keeps sqlx's 5 s too.
const defaultBusyTimeoutMs = 5000

// Knobs are the SQLite settings of a cell, validated (lab-core's `Knobs`).
type Knobs struct {
	Server      bool
	Synchronous string // upper-cased override, or ""
	MmapSize    *uint64
	Memstatus   bool
	FullMutex   bool
}

// KnobsFromCell is `Knobs::from_cell`.
func KnobsFromCell(cell *Cell) (*Knobs, error) {
	k := &Knobs{MmapSize: cell.MmapSize, Memstatus: cell.Memstatus}
	if cell.Synchronous != nil {
		upper := strings.ToUpper(*cell.Synchronous)
		switch upper {
		case "OFF", "NORMAL", "FULL", "EXTRA":
			k.Synchronous = upper
		default:
			return nil, fmt.Errorf("unknown synchronous `%s` (expected off, normal, full or extra)", *cell.Synchronous)
		}
	}
	switch cell.Profile {
	case "server":
		k.Server = true
	case "sqlite-default":
	default:
		return nil, fmt.Errorf("unknown profile `%s` (expected `server` or `sqlite-default`)", cell.Profile)
	}
	switch cell.Mutex {
	case "nomutex":
	case "fullmutex":
		k.FullMutex = true
	default:
		return nil, fmt.Errorf("unknown mutex mode `%s` (expected `nomutex` or `fullmutex`)", cell.Mutex)
	}
	return k, nil
}

// Pragmas is `Knobs::pragmas`: the profile's, then the overrides.
func (k *Knobs) Pragmas() []Pragma {
	var out []Pragma
	if k.Server {
		out = append(out, serverPragmas...)
	}
	set := func(name, value string) {
		kept := out[:0]
		for _, p := range out {
			if p.Name != name {
				kept = append(kept, p)
			}
		}
		out = append(kept, Pragma{name, value, true})
	}
	if k.Synchronous != "" {
		set("synchronous", k.Synchronous)
	}
	if k.MmapSize != nil {
		set("mmap_size", strconv.FormatUint(*k.MmapSize, 10))
	}
	return out
}

// ConnectionPragmas is `Knobs::connection_pragmas`.
func (k *Knobs) ConnectionPragmas() []Pragma {
	var out []Pragma
	for _, p := range k.Pragmas() {
		if p.PerConnection {
			out = append(out, p)
		}
	}
	return out
}

// withBusyTimeout puts the default busy timeout first unless the pragmas set one (the server profile does).
func withBusyTimeout(pragmas []Pragma) []Pragma {
	for _, p := range pragmas {
		if p.Name == "busy_timeout" {
			return pragmas
		}
	}
	return append([]Pragma{{"busy_timeout", strconv.Itoa(defaultBusyTimeoutMs), true}}, pragmas...)
}
