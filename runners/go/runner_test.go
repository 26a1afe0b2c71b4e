package main

// Protocol conformance: the runner binary, built once for the tests, piped tiny cells.

import (
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

var runnerBinary string

func TestMain(m *testing.M) {
	dir, err := os.MkdirTemp("", "runner-go-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	runnerBinary = filepath.Join(dir, "runner-go")
	build := exec.Command("go", "build", "-o", runnerBinary, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "cannot build the runner:", err)
		os.Exit(1)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// invoke runs the runner with stdin and args, with a deadline so a hang fails the test instead of blocking it.
func invoke(t *testing.T, stdin string, args ...string) (stdout, stderr string, exit int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, runnerBinary, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("the runner did not finish within 60 s (stdin %q)", stdin)
	}
	exit = 0
	if ee, ok := err.(*exec.ExitError); ok {
		exit = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out.String(), errb.String(), exit
}

// tinyCell is the brief's short cell: 300 ms after 100 ms of warm-up, 4 goroutines, 1000 rows.
func tinyCell(t *testing.T, approach, workload string) map[string]any {
	cell := map[string]any{
		"workload": workload, "approach": approach, "duration_ms": 300, "warmup_ms": 100, "concurrency": 4,
		"worker_threads": 2, "profile": "server", "synchronous": nil, "memstatus": false, "mutex": "nomutex",
		"rows": 1000, "multi_db": nil, "dir": t.TempDir(), "seed": 7,
	}
	if workload == "multi-db" {
		cell["multi_db"] = map[string]any{"num_databases": 2, "readers": 1, "write_delay_ms": 50, "write_mode": "paced"}
	}
	return cell
}

// runCellJSON runs cell and returns its result, asserting exit 0 and one JSON document on stdout.
func runCellJSON(t *testing.T, cell map[string]any) map[string]any {
	t.Helper()
	in, _ := json.Marshal(cell)
	out, errs, exit := invoke(t, string(in))
	if exit != 0 {
		t.Fatalf("exit %d: %s", exit, errs)
	}
	dec := json.NewDecoder(strings.NewReader(out))
	var result map[string]any
	if err := dec.Decode(&result); err != nil {
		t.Fatalf("stdout is not JSON: %v\n%s", err, out)
	}
	if dec.More() {
		t.Fatalf("more than one JSON document on stdout:\n%s", out)
	}
	return result
}

func num(v any) float64 {
	f, _ := v.(float64)
	return f
}

func TestApproachesAreListed(t *testing.T) {
	out, _, exit := invoke(t, "", "--approaches")
	var names []string
	if exit != 0 || json.Unmarshal([]byte(out), &names) != nil {
		t.Fatalf("exit %d, stdout %q", exit, out)
	}
	if strings.Join(names, ",") != "go-mattn,go-modernc,go-zombiezen" {
		t.Fatalf("approaches %v", names)
	}
}

func TestMalformedCellsExit2WithAMessage(t *testing.T) {
	valid := tinyCell(t, "go-mattn", "point-read")
	good, _ := json.Marshal(valid)
	withExtra := map[string]any{}
	for k, v := range valid {
		withExtra[k] = v
	}
	withExtra["colour"] = "blue"
	extra, _ := json.Marshal(withExtra)
	missing := map[string]any{}
	for k, v := range valid {
		if k != "seed" {
			missing[k] = v
		}
	}
	noSeed, _ := json.Marshal(missing)
	badMulti := tinyCell(t, "go-mattn", "multi-db")
	badMulti["multi_db"].(map[string]any)["shards"] = 3
	multi, _ := json.Marshal(badMulti)
	for _, c := range []struct{ name, stdin, message string }{
		{"empty", "", "not a valid cell"},
		{"not JSON", "{workload: point-read", "not a valid cell"},
		{"truncated", string(good[:len(good)-1]), "not a valid cell"},
		{"trailing data", string(good) + " {}", "not a valid cell"},
		{"an array", "[1, 2]", "not a valid cell"},
		{"unknown field", string(extra), "`colour`"},
		{"missing field", string(noSeed), "missing field `seed`"},
		{"unknown multi_db field", string(multi), "`shards`"},
		{"wrong type", strings.Replace(string(good), `"rows":1000`, `"rows":"many"`, 1), "not a valid cell"},
	} {
		t.Run(c.name, func(t *testing.T) {
			out, errs, exit := invoke(t, c.stdin)
			if exit != 2 {
				t.Fatalf("exit %d, want 2 (stdout %q, stderr %q)", exit, out, errs)
			}
			if out != "" {
				t.Fatalf("printed a result for a malformed cell: %q", out)
			}
			if !strings.Contains(errs, c.message) {
				t.Fatalf("stderr %q does not say %q", errs, c.message)
			}
		})
	}
}

func TestUnknownApproachIsAFailedResult(t *testing.T) {
	r := runCellJSON(t, tinyCell(t, "go-sqlc", "point-read"))
	failure, _ := r["failure"].(string)
	if !strings.Contains(failure, "unknown approach `go-sqlc`") || !strings.Contains(failure, "go-zombiezen") {
		t.Fatalf("failure %q", failure)
	}
	env := r["env"].(map[string]any)
	if env["runner"] != runnerName || env["open_files_limit"] == nil {
		t.Fatalf("env %v", env)
	}
}

func TestUnsupportedWorkloadIsAFailedResult(t *testing.T) {
	for _, w := range []string{"mixed", "orm", "nonsense"} {
		r := runCellJSON(t, tinyCell(t, "go-modernc", w))
		want := fmt.Sprintf("workload `%s` is not supported by runner-go 0.1.0 (supported: point-read, insert, queue, multi-db)", w)
		if r["failure"] != want {
			t.Fatalf("failure %q, want %q", r["failure"], want)
		}
	}
}

// assertMeasured checks what every successful result must carry.
func assertMeasured(t *testing.T, r map[string]any, approach string) {
	t.Helper()
	if r["failure"] != nil || num(r["errors"]) != 0 {
		t.Fatalf("failure %v, errors %v %v", r["failure"], r["errors"], r["error_samples"])
	}
	env := r["env"].(map[string]any)
	if env["sqlite_version"] == "" || len(env["compile_options"].([]any)) == 0 {
		t.Fatalf("env %v", env)
	}
	pragmas := env["pragmas"].(map[string]any)
	if pragmas["journal_mode"] != "wal" || pragmas["synchronous"] != "1" || pragmas["mmap_size"] != "268435456" {
		t.Fatalf("pragmas %v", pragmas)
	}
	versions := env["crate_versions"].(map[string]any)
	module := map[string]string{"go-mattn": "github.com/mattn/go-sqlite3", "go-modernc": "modernc.org/sqlite", "go-zombiezen": "zombiezen.com/go/sqlite"}[approach]
	if v, _ := versions[module].(string); !strings.HasPrefix(v, "v1.") || versions["go"] == nil {
		t.Fatalf("crate_versions %v", versions)
	}
	if num(r["wall_secs"]) != 0.3 || r["threads"] == nil || r["rss_bytes"] == nil {
		t.Fatalf("wall %v threads %v rss %v", r["wall_secs"], r["threads"], r["rss_bytes"])
	}
	if env["core_round_trip_before_ns"] != nil || env["cpus"] == nil || !strings.HasSuffix(env["date"].(string), "Z") {
		t.Fatalf("env %v", env)
	}
	// The process's own CPU accounting: some CPU for every operation, and an idle window after the measured one.
	idle, ok := r["idle_cpu"].(map[string]any)
	if num(r["cpu_per_op_us"]) <= 0 || !ok || num(idle["secs"]) <= 0 || num(idle["cpu_secs"]) < 0 {
		t.Fatalf("cpu_per_op_us %v idle_cpu %v", r["cpu_per_op_us"], r["idle_cpu"])
	}
}

func stats(r map[string]any, key string) map[string]any { return r[key].(map[string]any) }

func TestEveryApproachRunsEveryWorkload(t *testing.T) {
	for _, approach := range approaches {
		t.Run(approach, func(t *testing.T) {
			t.Run("point-read", func(t *testing.T) {
				r := runCellJSON(t, tinyCell(t, approach, "point-read"))
				assertMeasured(t, r, approach)
				reads := stats(r, "reads")
				if num(reads["ops"]) == 0 || num(stats(r, "writes")["ops"]) != 0 {
					t.Fatalf("reads %v writes %v", reads, r["writes"])
				}
				if !(num(reads["p50_us"]) <= num(reads["p99_us"]) && num(reads["p99_us"]) <= num(reads["max_us"])) {
					t.Fatalf("latencies out of order: %v", reads)
				}
				if r["window_allocations"] != nil || len(r["operations"].([]any)) != 0 {
					t.Fatalf("point-read counts no allocations and names no operations: %v", r)
				}
			})
			t.Run("insert", func(t *testing.T) {
				cell := tinyCell(t, approach, "insert")
				r := runCellJSON(t, cell)
				assertMeasured(t, r, approach)
				writes := num(stats(r, "writes")["ops"])
				if writes == 0 || num(stats(r, "reads")["ops"]) != 0 {
					t.Fatalf("writes %v reads %v", r["writes"], r["reads"])
				}
				var rows int
				queryInt(t, filepath.Join(cell["dir"].(string), "items.db"), "SELECT count(*) FROM items", &rows)
				if float64(rows) < 1000+writes {
					t.Fatalf("%d rows after %v inserts on 1000", rows, writes)
				}
			})
			t.Run("queue", func(t *testing.T) {
				cell := tinyCell(t, approach, "queue")
				r := runCellJSON(t, cell)
				assertMeasured(t, r, approach)
				ops := r["operations"].([]any)
				var names []string
				for _, o := range ops {
					names = append(names, o.(map[string]any)["name"].(string))
				}
				if strings.Join(names, ",") != "publish,claim,ack,cycle" {
					t.Fatalf("operations %v", names)
				}
				cycles := num(ops[3].(map[string]any)["stats"].(map[string]any)["ops"])
				if cycles == 0 {
					t.Fatal("no cycle counted")
				}
				for _, o := range ops {
					op := o.(map[string]any)
					if num(op["stats"].(map[string]any)["ops"]) != cycles || op["allocs_per_op"] == nil || op["alloc_bytes_per_op"] == nil {
						t.Fatalf("operation %v", op)
					}
				}
				if num(ops[3].(map[string]any)["allocs_per_op"]) <= 0 || num(r["window_allocations"]) <= 0 || num(r["window_alloc_bytes"]) <= 0 {
					t.Fatalf("allocations not counted: %v %v", ops[3], r["window_allocations"])
				}
				// Every cycle deletes the job it claimed, and the runner waits for its cycles: the backlog is left.
				var jobs, claimed int
				queryInt(t, filepath.Join(cell["dir"].(string), "queue.db"), "SELECT count(*) FROM jobs", &jobs)
				queryInt(t, filepath.Join(cell["dir"].(string), "queue.db"), "SELECT count(claimed_by) FROM jobs", &claimed)
				if jobs != 1000 || claimed != 0 {
					t.Fatalf("%d jobs, %d claimed after the cell; want the 1000-job backlog, none claimed", jobs, claimed)
				}
			})
			t.Run("multi-db", func(t *testing.T) {
				cell := tinyCell(t, approach, "multi-db")
				r := runCellJSON(t, cell)
				assertMeasured(t, r, approach)
				c, ok := r["write_completion"].(map[string]any)
				if !ok {
					t.Fatalf("no write_completion: %v", r)
				}
				// 300 ms window, a write due every 50 ms on each of 2 databases.
				if num(c["expected"]) != 12 || num(c["completed"]) != num(stats(r, "writes")["ops"]) || num(c["completed"]) > 12 {
					t.Fatalf("write_completion %v, writes %v", c, r["writes"])
				}
				if num(stats(r, "reads")["ops"]) == 0 || num(r["open_databases"]) != 2 {
					t.Fatalf("reads %v open_databases %v", r["reads"], r["open_databases"])
				}
				for db := 0; db < 2; db++ {
					var blocks int
					queryInt(t, filepath.Join(cell["dir"].(string), fmt.Sprintf("ledger-%04d.db", db)), "SELECT count(*) FROM blocks", &blocks)
					if blocks <= ledgerSeedBlocks {
						t.Fatalf("database %d: %d blocks, none written", db, blocks)
					}
				}
			})
		})
	}
}

// The blocking write mode sleeps inside the write transaction: every counted write lasts at least the delay.
func TestBlockingWritesHoldTheirDelay(t *testing.T) {
	cell := tinyCell(t, "go-mattn", "multi-db")
	cell["multi_db"] = map[string]any{"num_databases": 2, "readers": 1, "write_delay_ms": 20}
	r := runCellJSON(t, cell)
	assertMeasured(t, r, "go-mattn")
	c := r["write_completion"].(map[string]any)
	if num(c["expected"]) != 30 {
		t.Fatalf("write_completion %v", c)
	}
	if w := stats(r, "writes"); num(w["ops"]) > 0 && num(w["p50_us"]) < 20_000 {
		t.Fatalf("writes shorter than their 20 ms delay: %v", w)
	}
}

// sqlite-default touches no PRAGMA but the busy timeout; the overrides still apply.
func TestSqliteDefaultProfileAndOverrides(t *testing.T) {
	for _, approach := range approaches {
		cell := tinyCell(t, approach, "point-read")
		cell["profile"] = "sqlite-default"
		r := runCellJSON(t, cell)
		p := r["env"].(map[string]any)["pragmas"].(map[string]any)
		if r["failure"] != nil || p["journal_mode"] != "delete" || p["foreign_keys"] != "0" || p["synchronous"] != "2" || p["busy_timeout"] != "5000" {
			t.Fatalf("%s: failure %v, pragmas %v", approach, r["failure"], p)
		}
		cell = tinyCell(t, approach, "point-read")
		cell["synchronous"] = "off"
		cell["mmap_size"] = 0
		r = runCellJSON(t, cell)
		p = r["env"].(map[string]any)["pragmas"].(map[string]any)
		if r["failure"] != nil || p["synchronous"] != "0" || p["mmap_size"] != "0" || p["journal_mode"] != "wal" {
			t.Fatalf("%s: failure %v, pragmas %v", approach, r["failure"], p)
		}
	}
}

func queryInt(t *testing.T, path, query string, dest *int) {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if err := db.QueryRow(query).Scan(dest); err != nil {
		t.Fatalf("%s on %s: %v", query, path, err)
	}
}

// SplitMix64's published first output for seed 0, and lab-core's range helpers.
func TestRngIsSplitMix64(t *testing.T) {
	if got := NewRng(0).NextU64(); got != 0xE220A8397B1DCDAF {
		t.Fatalf("first output %#x", got)
	}
	r := NewRng(7)
	for i := 0; i < 10_000; i++ {
		if v := r.Between(1, 10); v < 1 || v > 10 {
			t.Fatal(v)
		}
	}
	if r.Between(5, 5) != 5 || len(r.Bytes(13)) != 13 {
		t.Fatal("ranges")
	}
}

// The tests of pacing.rs and multi_db.rs's `expected`.
func TestPacedSchedulesAndExpectedWrites(t *testing.T) {
	ms := time.Millisecond
	s := scheduleFor(100*ms, 1, 4)
	if s.phase != 25*ms || s.tick(3) != 325*ms {
		t.Fatal(s)
	}
	if s.ticksIn(0, 25*ms) != 0 || s.ticksIn(0, 26*ms) != 1 || s.ticksIn(25*ms, 125*ms) != 1 || s.ticksIn(30*ms, 330*ms) != 3 || s.ticksIn(330*ms, 30*ms) != 0 {
		t.Fatal("ticksIn")
	}
	cell := &Cell{DurationMs: 1000, WarmupMs: 250}
	if *expectedWrites(cell, true, 100*ms, 7) != 70 || *expectedWrites(cell, false, 100*ms, 7) != 70 {
		t.Fatal("whole periods")
	}
	if *expectedWrites(cell, true, 300*ms, 3) != 10 || *expectedWrites(cell, false, 300*ms, 3) != 9 {
		t.Fatal("partial periods")
	}
	if expectedWrites(cell, false, 0, 3) != nil {
		t.Fatal("no delay, no expectation")
	}
}
