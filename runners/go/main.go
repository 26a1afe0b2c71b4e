// Command runner-go runs one quicklite lab cell for the Go approaches (go-mattn, go-modernc, go-zombiezen) and
// prints its result.
//
// Protocol (crates/lab-core/src/runner_main.rs): one cell as JSON on standard input, exactly one result as JSON
// on standard output, exit 0 (also when the cell fails: `failure` says why); logs on standard error; `--approaches`
// prints the JSON list of approach names. A malformed cell is exit 2 with a message on standard error.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
)

const runnerName = "runner-go 0.1.0"

var approaches = []string{"go-mattn", "go-modernc", "go-zombiezen"}

func runtimeNumCPU() int { return runtime.NumCPU() }

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, runnerName+": "+format+"\n", args...)
}

func main() {
	args := os.Args[1:]
	switch {
	case len(args) == 0:
	case len(args) == 1 && args[0] == "--approaches":
		os.Exit(printJSON(approaches))
	default:
		fmt.Fprintf(os.Stderr, "usage: %s [--approaches]\n  reads one cell as JSON on standard input, prints its result as JSON\n", runnerName)
		os.Exit(2)
	}
	input, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: cannot read the cell from standard input: %v\n", runnerName, err)
		os.Exit(2)
	}
	cell, err := ParseCell(input)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", runnerName, err)
		os.Exit(2)
	}
	result := runCell(cell)
	os.Exit(printJSON(result))
}

func printJSON(v any) int {
	b, err := json.Marshal(v)
	if err != nil {
		fmt.Fprintf(os.Stderr, "cannot write the result to standard output: %v\n", err)
		return 1
	}
	b = append(b, '\n')
	if _, err := os.Stdout.Write(b); err != nil {
		fmt.Fprintf(os.Stderr, "cannot write the result to standard output: %v\n", err)
		return 1
	}
	return 0
}

// runCell runs one cell and always returns a result; a failure (a panic included) is recorded in it.
func runCell(cell *Cell) (result CellResult) {
	env := forMachine(runnerName)
	if limit, err := raiseOpenFilesLimit(); err == nil {
		env.OpenFilesLimit = &limit
	} else {
		logf("cannot raise the open-file limit: %v", err)
		env.OpenFilesLimit = openFilesSoftLimit()
	}
	supported := false
	for _, a := range approaches {
		supported = supported || a == cell.Approach
	}
	if !supported {
		return FailedResult(cell, env, fmt.Sprintf("unknown approach `%s` for %s (supported: %s)",
			cell.Approach, runnerName, strings.Join(approaches, ", ")))
	}
	// The Rust runners run the cell on `worker_threads` tokio workers; Go's counterpart is GOMAXPROCS.
	runtime.GOMAXPROCS(int(max(cell.WorkerThreads, 1)))
	logf("%s / %s for %d ms after %d ms warm-up (GOMAXPROCS %d)", cell.Workload, cell.Approach,
		cell.DurationMs, cell.WarmupMs, runtime.GOMAXPROCS(0))
	defer func() {
		if p := recover(); p != nil {
			result = FailedResult(cell, env, fmt.Sprintf("runner-go panicked: %v", p))
		}
	}()
	m, err := run(cell, &env)
	if err != nil {
		return FailedResult(cell, env, err.Error())
	}
	return m.IntoResult(cell, env)
}

// describer is an approach that can read its SQLite's facts into the environment.
type describer interface {
	Approach
	describe(env *Environment) error
}

// run sets the process up, seeds, opens the approach and drives the cell (the Rust runners' `Runner::run`),
// filling the SQLite fields of env as they become known.
func run(cell *Cell, env *Environment) (Measurement, error) {
	w, err := WorkloadOfCell(cell)
	if err != nil {
		return Measurement{}, err
	}
	knobs, err := KnobsFromCell(cell)
	if err != nil {
		return Measurement{}, err
	}
	env.CrateVersions = moduleVersions(cell.Approach)
	if cell.BuildProfile != defaultBuildPro {
		logf("build_profile `%s` is only recorded: each Go driver has one SQLite build (see README.md)", cell.BuildProfile)
	}
	switch {
	case cell.Approach == "go-modernc" && !knobs.FullMutex:
		logf("mutex `nomutex` cannot apply: modernc.org/sqlite always opens connections with SQLITE_OPEN_FULLMUTEX")
	case cell.Approach == "go-zombiezen" && knobs.FullMutex:
		logf("mutex `fullmutex` cannot apply: zombiezen.com/go/sqlite always opens connections with SQLITE_OPEN_NOMUTEX")
	}
	// Process-wide, before the first connection of the process (seeding included).
	rc := configureMemstatus(cell.Approach, knobs.Memstatus)

	if err := os.MkdirAll(cell.Dir, 0o755); err != nil {
		return Measurement{}, fmt.Errorf("cannot create the cell directory %s: %w", cell.Dir, err)
	}
	switch cell.Approach {
	case "go-mattn":
		err = seedSQL("mattn", cell, w, knobs)
	case "go-modernc":
		err = seedSQL("modernc", cell, w, knobs)
	case "go-zombiezen":
		err = seedZombie(cell, w, knobs)
	}
	if err != nil {
		return Measurement{}, err
	}
	if err := copySeededDatabase(cell, w); err != nil {
		return Measurement{}, err
	}

	var a describer
	switch cell.Approach {
	case "go-mattn":
		a, err = openSQLApproach("mattn", cell, w, knobs)
	case "go-modernc":
		a, err = openSQLApproach("modernc", cell, w, knobs)
	case "go-zombiezen":
		a, err = openZombieApproach(cell, w, knobs)
	}
	if err != nil {
		return Measurement{}, err
	}
	if err := a.describe(env); err != nil {
		return Measurement{}, err
	}
	env.Memstatus = memstatusOutcome(cell.Approach, knobs.Memstatus, rc)
	return Drive(cell, w, a)
}

// copySeededDatabase is `Workload::copy_seeded_database`: database 0's file, seeded and closed, copied to the
// cell's other databases.
func copySeededDatabase(cell *Cell, w Workload) error {
	databases := w.Databases(cell)
	if databases < 2 {
		return nil
	}
	template := w.DatabasePath(cell, 0)
	if st, err := os.Stat(template + "-wal"); err == nil && st.Size() > 0 {
		return fmt.Errorf("%s still has a write-ahead log: close every connection to it before copying", template)
	}
	data, err := os.ReadFile(template)
	if err != nil {
		return fmt.Errorf("cannot read the seeded %s: %w", template, err)
	}
	for db := 1; db < databases; db++ {
		path := w.DatabasePath(cell, db)
		if err := os.WriteFile(path, data, 0o644); err != nil {
			return fmt.Errorf("cannot copy the seeded %s to %s: %w", template, path, err)
		}
	}
	return nil
}

// moduleVersions are the versions of the Go modules under test (the Rust runners' crate_versions), as built into
// this binary, and the Go toolchain's.
func moduleVersions(approach string) map[string]string {
	wanted := map[string][]string{
		"go-mattn":     {"github.com/mattn/go-sqlite3"},
		"go-modernc":   {"modernc.org/sqlite", "modernc.org/libc"},
		"go-zombiezen": {"zombiezen.com/go/sqlite", "modernc.org/sqlite", "modernc.org/libc"},
	}[approach]
	out := map[string]string{"go": runtime.Version()}
	if info, ok := debug.ReadBuildInfo(); ok {
		for _, dep := range info.Deps {
			for _, w := range wanted {
				if dep.Path == w {
					v := dep.Version
					if dep.Replace != nil {
						v += " => " + dep.Replace.Path + " " + dep.Replace.Version
					}
					out[w] = v
				}
			}
		}
	}
	return out
}
