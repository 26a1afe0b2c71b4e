package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
)

// Cell mirrors quicklite_lab_core::Cell (crates/lab-core/src/cell.rs), field for field and in the same order, so
// the cell echoed in the result serializes as the Rust runners' does.
type Cell struct {
	Workload      string   `json:"workload"`
	Approach      string   `json:"approach"`
	DurationMs    uint64   `json:"duration_ms"`
	WarmupMs      uint64   `json:"warmup_ms"`
	Concurrency   uint32   `json:"concurrency"`
	WorkerThreads uint32   `json:"worker_threads"`
	Profile       string   `json:"profile"`
	Synchronous   *string  `json:"synchronous"`
	Memstatus     bool     `json:"memstatus"`
	MmapSize      *uint64  `json:"mmap_size"`
	Mutex         string   `json:"mutex"`
	Rows          uint64   `json:"rows"`
	MultiDb       *MultiDb `json:"multi_db"`
	Dir           string   `json:"dir"`
	Seed          uint64   `json:"seed"`
	// serde: default, skip_serializing_if = 0.
	Repetition uint32 `json:"repetition,omitempty"`
	// serde: default "tuned".
	BuildProfile string `json:"build_profile"`
	// serde: default, skip_serializing_if = None.
	PostgresURL *string `json:"postgres_url,omitempty"`
}

// MultiDb mirrors quicklite_lab_core::MultiDb.
type MultiDb struct {
	NumDatabases uint32 `json:"num_databases"`
	Readers      uint32 `json:"readers"`
	WriteDelayMs uint64 `json:"write_delay_ms"`
	// serde: default "blocking"; `blocking` or `paced`.
	WriteMode    string  `json:"write_mode"`
	TotalReaders *uint32 `json:"total_readers"`
}

// Fields of a cell, as serde sees them: required ones must be present and not null; optional ones (Option<T>)
// may be absent or null; defaulted ones may be absent but not null.
var (
	cellRequired    = []string{"workload", "approach", "duration_ms", "warmup_ms", "concurrency", "worker_threads", "profile", "memstatus", "mutex", "rows", "dir", "seed"}
	cellOptional    = []string{"synchronous", "mmap_size", "multi_db", "postgres_url"}
	cellDefaulted   = []string{"repetition", "build_profile"}
	multiRequired   = []string{"num_databases", "readers", "write_delay_ms"}
	multiOptional   = []string{"total_readers"}
	multiDefaulted  = []string{"write_mode"}
	defaultBuildPro = "tuned"
)

// checkFields applies serde's rules (deny_unknown_fields, required fields, no null for a non-Option field) to
// one JSON object.
func checkFields(what string, raw map[string]json.RawMessage, required, optional, defaulted []string) error {
	known := map[string]bool{}
	for _, list := range [][]string{required, optional, defaulted} {
		for _, k := range list {
			known[k] = true
		}
	}
	var unknown []string
	for k := range raw {
		if !known[k] {
			unknown = append(unknown, k)
		}
	}
	if len(unknown) > 0 {
		sort.Strings(unknown)
		var expected []string
		for _, list := range [][]string{required, optional, defaulted} {
			expected = append(expected, list...)
		}
		return fmt.Errorf("unknown field(s) %s in %s (expected: %s)", quoteAll(unknown), what, strings.Join(expected, ", "))
	}
	for _, k := range required {
		v, ok := raw[k]
		if !ok {
			return fmt.Errorf("missing field `%s` in %s", k, what)
		}
		if string(v) == "null" {
			return fmt.Errorf("field `%s` of %s is null", k, what)
		}
	}
	for _, k := range defaulted {
		if v, ok := raw[k]; ok && string(v) == "null" {
			return fmt.Errorf("field `%s` of %s is null", k, what)
		}
	}
	return nil
}

func quoteAll(names []string) string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "`" + n + "`"
	}
	return strings.Join(out, ", ")
}

// ParseCell parses a cell as serde_json with `deny_unknown_fields` would: malformed JSON, trailing data, an
// unknown or missing field, a null where no Option is, or a value of the wrong type are errors.
func ParseCell(input []byte) (*Cell, error) {
	var raw map[string]json.RawMessage
	if err := json.Unmarshal(input, &raw); err != nil {
		return nil, fmt.Errorf("standard input is not a valid cell (JSON): %w", err)
	}
	if raw == nil {
		return nil, fmt.Errorf("standard input is not a valid cell (JSON): expected an object, found null")
	}
	if err := checkFields("the cell", raw, cellRequired, cellOptional, cellDefaulted); err != nil {
		return nil, fmt.Errorf("standard input is not a valid cell (JSON): %w", err)
	}
	if m, ok := raw["multi_db"]; ok && string(m) != "null" {
		var mraw map[string]json.RawMessage
		if err := json.Unmarshal(m, &mraw); err != nil {
			return nil, fmt.Errorf("standard input is not a valid cell (JSON): multi_db: %w", err)
		}
		if err := checkFields("multi_db", mraw, multiRequired, multiOptional, multiDefaulted); err != nil {
			return nil, fmt.Errorf("standard input is not a valid cell (JSON): %w", err)
		}
	}
	cell := &Cell{BuildProfile: defaultBuildPro}
	if err := json.Unmarshal(input, cell); err != nil {
		return nil, fmt.Errorf("standard input is not a valid cell (JSON): %w", err)
	}
	if cell.MultiDb != nil {
		switch cell.MultiDb.WriteMode {
		case "":
			cell.MultiDb.WriteMode = "blocking"
		case "blocking", "paced":
		default:
			return nil, fmt.Errorf("standard input is not a valid cell (JSON): unknown variant `%s` of multi_db.write_mode, expected `blocking` or `paced`", cell.MultiDb.WriteMode)
		}
	}
	return cell, nil
}

// Workload is one of the lab's workloads this runner implements.
type Workload int

const (
	PointRead Workload = iota
	Insert
	Queue
	MultiDbWorkload
)

var workloadNames = map[string]Workload{"point-read": PointRead, "insert": Insert, "queue": Queue, "multi-db": MultiDbWorkload}

const supportedWorkloads = "point-read, insert, queue, multi-db"

// WorkloadOfCell is `Workload::of_cell`, limited to the workloads this runner implements.
func WorkloadOfCell(cell *Cell) (Workload, error) {
	w, ok := workloadNames[cell.Workload]
	if !ok {
		return 0, fmt.Errorf("workload `%s` is not supported by %s (supported: %s)", cell.Workload, runnerName, supportedWorkloads)
	}
	switch w {
	case MultiDbWorkload:
		m := cell.MultiDb
		if m == nil {
			return 0, fmt.Errorf("the multi-db workload needs `multi_db` settings (num_databases, readers, write_delay_ms, write_mode, total_readers)")
		}
		if m.NumDatabases == 0 {
			return 0, fmt.Errorf("multi-db needs at least one database (num_databases = 0)")
		}
		if m.WriteMode == "paced" && m.WriteDelayMs == 0 {
			return 0, fmt.Errorf("paced writes need a period (write_delay_ms = 0)")
		}
	case PointRead:
		if cell.Rows == 0 {
			return 0, fmt.Errorf("point-read needs rows to read (rows = 0)")
		}
	}
	if cell.Concurrency == 0 && w != MultiDbWorkload {
		return 0, fmt.Errorf("concurrency must be at least 1")
	}
	return w, nil
}

// Databases is `Workload::databases`.
func (w Workload) Databases(cell *Cell) int {
	if w == MultiDbWorkload && cell.MultiDb != nil {
		return int(cell.MultiDb.NumDatabases)
	}
	return 1
}

// DatabaseName is `Workload::database_name`.
func (w Workload) DatabaseName(db int) string {
	switch w {
	case MultiDbWorkload:
		return fmt.Sprintf("ledger-%04d", db)
	case Queue:
		return "queue"
	default:
		return "items"
	}
}

// DatabasePath is `Workload::database_path`.
func (w Workload) DatabasePath(cell *Cell, db int) string {
	return filepath.Join(cell.Dir, w.DatabaseName(db)+".db")
}

// Schema is `Workload::schema`.
func (w Workload) Schema() string {
	switch w {
	case MultiDbWorkload:
		return ledgerSchema
	case Queue:
		return queueSchema
	default:
		return itemsSchema
	}
}

// SeedRows is `Workload::seed_rows`.
func (w Workload) SeedRows(cell *Cell, yield func(Statement) error) error {
	switch w {
	case MultiDbWorkload:
		return ledgerSeed(cell.Seed, 0, yield)
	case Queue:
		return jobSeed(cell.Rows, cell.Seed, yield)
	default:
		return itemSeed(cell.Rows, cell.Seed, yield)
	}
}

// ReaderTasks is `MultiDb::reader_tasks`.
func (m *MultiDb) ReaderTasks() uint64 {
	if m.TotalReaders != nil {
		return uint64(*m.TotalReaders)
	}
	return uint64(m.Readers) * uint64(m.NumDatabases)
}
