package main

// CellResult mirrors quicklite_lab_core::CellResult (crates/lab-core/src/result.rs): same field names, order and
// JSON shapes. Slices and maps are never nil (serde wants `[]` / `{}`, not null).
type CellResult struct {
	Cell              *Cell       `json:"cell"`
	Failure           *string     `json:"failure"`
	Reads             OpStats     `json:"reads"`
	Writes            OpStats     `json:"writes"`
	WriteCompletion   *Completion `json:"write_completion"`
	Errors            uint64      `json:"errors"`
	ErrorSamples      []string    `json:"error_samples"`
	WallSecs          float64     `json:"wall_secs"`
	CPUSecs           float64     `json:"cpu_secs"`
	Threads           *uint64     `json:"threads"`
	RSSBytes          *uint64     `json:"rss_bytes"`
	OpenDatabases     *uint64     `json:"open_databases"`
	DatabaseOpens     *uint64     `json:"database_opens"`
	Operations        []NamedOp   `json:"operations"`
	WindowAllocations *uint64     `json:"window_allocations"`
	WindowAllocBytes  *uint64     `json:"window_alloc_bytes"`
	CPUPerOpUs        *float64    `json:"cpu_per_op_us"`
	IdleCPU           *IdleCPU    `json:"idle_cpu"`
	Env               Environment `json:"env"`
}

// IdleCPU mirrors quicklite_lab_core::IdleCpu: the process's CPU time in the idle window after the measured one.
type IdleCPU struct {
	Secs    float64 `json:"secs"`
	CPUSecs float64 `json:"cpu_secs"`
}

// NamedOp mirrors quicklite_lab_core::NamedOp.
type NamedOp struct {
	Name            string   `json:"name"`
	Stats           OpStats  `json:"stats"`
	AllocsPerOp     *float64 `json:"allocs_per_op"`
	AllocBytesPerOp *float64 `json:"alloc_bytes_per_op"`
}

// OpStats mirrors quicklite_lab_core::OpStats.
type OpStats struct {
	Ops       uint64  `json:"ops"`
	OpsPerSec float64 `json:"ops_per_sec"`
	AvgUs     float64 `json:"avg_us"`
	P50Us     float64 `json:"p50_us"`
	P99Us     float64 `json:"p99_us"`
	MaxUs     float64 `json:"max_us"`
}

// Completion mirrors quicklite_lab_core::Completion.
type Completion struct {
	Expected  uint64  `json:"expected"`
	Completed uint64  `json:"completed"`
	Ratio     float64 `json:"ratio"`
}

// Environment mirrors quicklite_lab_core::Environment.
type Environment struct {
	Runner                string            `json:"runner"`
	SqliteVersion         string            `json:"sqlite_version"`
	CompileOptions        []string          `json:"compile_options"`
	Pragmas               map[string]string `json:"pragmas"`
	CrateVersions         map[string]string `json:"crate_versions"`
	Memstatus             string            `json:"memstatus"`
	CPUModel              string            `json:"cpu_model"`
	CPUs                  uint32            `json:"cpus"`
	OpenFilesLimit        *uint64           `json:"open_files_limit"`
	CoreRoundTripBeforeNs *float64          `json:"core_round_trip_before_ns"`
	CoreRoundTripAfterNs  *float64          `json:"core_round_trip_after_ns"`
	Kernel                string            `json:"kernel"`
	Date                  string            `json:"date"`
}

// Measurement is what driving a cell measured (lab-core's `Measurement`).
type Measurement struct {
	Reads             OpStats
	Writes            OpStats
	WriteCompletion   *Completion
	Errors            uint64
	ErrorSamples      []string
	WallSecs          float64
	CPUSecs           float64
	Threads           *uint64
	RSSBytes          *uint64
	OpenDatabases     *uint64
	DatabaseOpens     *uint64
	Operations        []NamedOp
	WindowAllocations *uint64
	WindowAllocBytes  *uint64
	CPUPerOpUs        *float64
	IdleCPU           *IdleCPU
}

// operationsCompleted is `Measurement::operations_completed`: the queue's cycles, otherwise reads plus writes
// (and any named operations).
func (m Measurement) operationsCompleted() uint64 {
	var named uint64
	for _, op := range m.Operations {
		if op.Name == "cycle" {
			return op.Stats.Ops
		}
		named += op.Stats.Ops
	}
	return m.Reads.Ops + m.Writes.Ops + named
}

// cpuPerOpUsOfWindow is `Measurement::cpu_per_op_us_of_window`: the window's CPU time over its operations, in
// microseconds; nil when none completed.
func (m Measurement) cpuPerOpUsOfWindow() *float64 {
	ops := m.operationsCompleted()
	if ops == 0 {
		return nil
	}
	us := m.CPUSecs * 1e6 / float64(ops)
	return &us
}

// IntoResult is `Measurement::into_result`.
func (m Measurement) IntoResult(cell *Cell, env Environment) CellResult {
	r := CellResult{
		Cell: cell, Reads: m.Reads, Writes: m.Writes, WriteCompletion: m.WriteCompletion, Errors: m.Errors,
		ErrorSamples: m.ErrorSamples, WallSecs: m.WallSecs, CPUSecs: m.CPUSecs, Threads: m.Threads,
		RSSBytes: m.RSSBytes, OpenDatabases: m.OpenDatabases, DatabaseOpens: m.DatabaseOpens,
		Operations: m.Operations, WindowAllocations: m.WindowAllocations, WindowAllocBytes: m.WindowAllocBytes,
		CPUPerOpUs: m.CPUPerOpUs, IdleCPU: m.IdleCPU, Env: env,
	}
	r.normalize()
	return r
}

// FailedResult is `failed_result`.
func FailedResult(cell *Cell, env Environment, failure string) CellResult {
	r := Measurement{}.IntoResult(cell, env)
	r.Failure = &failure
	return r
}

func (r *CellResult) normalize() {
	if r.ErrorSamples == nil {
		r.ErrorSamples = []string{}
	}
	if r.Operations == nil {
		r.Operations = []NamedOp{}
	}
	if r.Env.CompileOptions == nil {
		r.Env.CompileOptions = []string{}
	}
	if r.Env.Pragmas == nil {
		r.Env.Pragmas = map[string]string{}
	}
	if r.Env.CrateVersions == nil {
		r.Env.CrateVersions = map[string]string{}
	}
}
