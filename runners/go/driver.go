package main

import (
	"errors"
	"fmt"
	"math"
	"runtime"
	"sync"
	"time"
)

// Approach is lab-core's `Approach`: one method per kind of operation; the driver chooses the operations.
type Approach interface {
	// PointRead runs POINT_READ for id, reading every column; a missing row is an error.
	PointRead(id int64) error
	// Insert runs INSERT_ITEM, one autocommit write.
	Insert(item *NewItem) error
	// JoinRead runs ACCOUNT_HISTORY for account on database db, reading every row and column.
	JoinRead(db int, account int64) error
	// PacedWrite appends block to database db in one BEGIN IMMEDIATE transaction, sleeping for delay inside it
	// before COMMIT (zero in the paced write mode).
	PacedWrite(db int, block *Block, delay time.Duration) error
	// Publish runs PUBLISH.
	Publish(payload string, createdAt int64) error
	// Claim runs CLAIM; ok is false when no job is waiting.
	Claim(owner, nowMs int64) (id int64, ok bool, err error)
	// Ack runs ACK; an error unless exactly one row was deleted.
	Ack(id, owner int64) error
	// OpenDatabases is the number of databases with open connections.
	OpenDatabases() uint64
}

// window is the measured window, fixed before the first goroutine starts (driver/window.rs).
type window struct {
	start        time.Time // when the warm-up began: the origin of the paced writers' schedules
	measureStart time.Time
	end          time.Time
}

func (w window) counts(done time.Time) bool {
	return !done.Before(w.measureStart) && done.Before(w.end)
}

func (w window) secs() float64 { return w.end.Sub(w.measureStart).Seconds() }

// edges are the timekeeper's samples of the process at the edges of the window.
type edges struct {
	cpuSecs    float64
	threads    *uint64
	rssBytes   *uint64
	mallocs    uint64
	allocBytes uint64
}

// windowedRun is `WindowedRun`: the window, its timekeeper and the statistics sink.
type windowedRun struct {
	window window
	stats  *statsSink
	edges  chan edges
}

// beginRun fixes the window from now and starts the timekeeper, a goroutine sampling CPU time, allocations (when
// countAllocs: runtime.ReadMemStats, which stops the world for a moment), threads and memory at the window's
// edges.
func beginRun(cell *Cell, kinds []OpKind, names []string, countAllocs bool) *windowedRun {
	stats := newStatsSink(runtime.GOMAXPROCS(0), kinds, names)
	start := time.Now()
	measureStart := start.Add(time.Duration(cell.WarmupMs) * time.Millisecond)
	w := window{start: start, measureStart: measureStart, end: measureStart.Add(time.Duration(cell.DurationMs) * time.Millisecond)}
	ch := make(chan edges, 1)
	go func() {
		status := openStatus()
		time.Sleep(time.Until(w.measureStart))
		cpuStart := cpuTime()
		var before, after runtime.MemStats
		if countAllocs {
			runtime.ReadMemStats(&before)
		}
		time.Sleep(time.Until(w.end))
		cpuEnd := cpuTime()
		if countAllocs {
			runtime.ReadMemStats(&after)
		}
		ch <- edges{
			cpuSecs:    (cpuEnd - cpuStart).Seconds(),
			threads:    status.threads(),
			rssBytes:   status.rssBytes(),
			mallocs:    after.Mallocs - before.Mallocs,
			allocBytes: after.TotalAlloc - before.TotalAlloc,
		}
	}()
	return &windowedRun{window: w, stats: stats, edges: ch}
}

// finish waits for the window to close and returns what every windowed workload reports, with the merged
// statistics. Goroutines still inside an operation are not waited for.
func (r *windowedRun) finish(a Approach, countAllocs bool) (Measurement, *taskStats) {
	e := <-r.edges
	total := r.stats.merged()
	wall := r.window.secs()
	open := a.OpenDatabases()
	m := Measurement{
		Reads:         total.opStats(Read, wall),
		Writes:        total.opStats(Write, wall),
		Errors:        total.errors,
		ErrorSamples:  append([]string{}, total.samples...),
		WallSecs:      wall,
		CPUSecs:       e.cpuSecs,
		Threads:       e.threads,
		RSSBytes:      e.rssBytes,
		OpenDatabases: &open,
		DatabaseOpens: &open,
	}
	if countAllocs {
		m.WindowAllocations = &e.mallocs
		m.WindowAllocBytes = &e.allocBytes
	}
	return m, total
}

// guard runs one operation, turning a panic (a driver bug, or zombiezen's pool refusing a connection) into that
// operation's error, as tokio does for a panicking task, instead of killing the runner without a result.
func guard(op func() error) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return op()
}

// record adds one operation that started at started to the block, if it completed inside the window.
func record(s *taskStats, w window, kind OpKind, started time.Time, err error) {
	done := time.Now()
	if w.counts(done) {
		store(s, kind, done.Sub(started), err)
	}
}

func store(s *taskStats, kind OpKind, latency time.Duration, err error) {
	s.mu.Lock()
	if err != nil {
		s.recordError(err.Error())
	} else {
		s.record(kind, latency.Nanoseconds())
	}
	s.mu.Unlock()
}

// idleWindow is lab-core's `IDLE_WINDOW`: how long the approach sits open and idle after the measured window while
// the process's CPU time is sampled.
const idleWindow = 500 * time.Millisecond

// Drive is lab-core's `drive` for this runner's workloads: the workload's driver, then the CPU per operation and
// the idle window, with the approach still open.
func Drive(cell *Cell, w Workload, a Approach) (Measurement, error) {
	m, err := driveWorkload(cell, w, a)
	if err != nil {
		return m, err
	}
	m.CPUPerOpUs = m.cpuPerOpUsOfWindow()
	idle := measureIdle(idleWindow)
	m.IdleCPU = &idle
	return m, nil
}

// measureIdle is lab-core's `measure_idle`: waits `window` sending nothing, and returns the process's CPU time over
// it.
func measureIdle(window time.Duration) IdleCPU {
	cpuStart, start := cpuTime(), time.Now()
	time.Sleep(window)
	return IdleCPU{Secs: time.Since(start).Seconds(), CPUSecs: (cpuTime() - cpuStart).Seconds()}
}

// driveWorkload runs the workload's own driver.
func driveWorkload(cell *Cell, w Workload, a Approach) (Measurement, error) {
	switch w {
	case PointRead, Insert:
		return driveClosedLoop(cell, w, a), nil
	case Queue:
		return driveQueue(cell, a)
	case MultiDbWorkload:
		return driveMultiDb(cell, a), nil
	}
	return Measurement{}, fmt.Errorf("workload %d not wired up", w)
}

// driveClosedLoop is driver/closed_loop.rs for point-read and insert: one goroutine per `concurrency`, each with
// its own random stream, operations back to back until the window closes.
func driveClosedLoop(cell *Cell, w Workload, a Approach) Measurement {
	kind := Read
	if w == Insert {
		kind = Write
	}
	run := beginRun(cell, []OpKind{kind}, nil, false)
	rows := int64(cell.Rows)
	if rows < 1 {
		rows = 1
	}
	for task := uint32(0); task < cell.Concurrency; task++ {
		rng := DeriveRng(cell.Seed, uint64(task))
		shard := run.stats.shard(int(task))
		go func() {
			for {
				started := time.Now()
				if !started.Before(run.window.end) {
					return
				}
				err := guard(func() error {
					if w == PointRead {
						return a.PointRead(rng.Between(1, rows))
					}
					item := RandomItem(rng)
					return a.Insert(&item)
				})
				record(shard, run.window, kind, started, err)
			}
		}()
	}
	m, _ := run.finish(a, false)
	return m
}

// queueProbeCycles is QUEUE_PROBE_CYCLES.
const queueProbeCycles = 1_000

var queueOperations = []string{"publish", "claim", "ack", "cycle"}

func nowMs() int64 { return time.Now().UnixMilli() }

var errNoJob = errors.New("claim found no unclaimed job")

// queueCycle is one cycle as worker owner: publish, claim the oldest unclaimed job, acknowledge it.
func queueCycle(a Approach, owner int64, payload string) (lat [3]time.Duration, err error) {
	t0 := time.Now()
	if err = a.Publish(payload, nowMs()); err != nil {
		return
	}
	t1 := time.Now()
	id, ok, err := a.Claim(owner, nowMs())
	if err != nil {
		return
	}
	if !ok {
		err = errNoJob
		return
	}
	t2 := time.Now()
	if err = a.Ack(id, owner); err != nil {
		return
	}
	t3 := time.Now()
	return [3]time.Duration{t1.Sub(t0), t2.Sub(t1), t3.Sub(t2)}, nil
}

// driveQueue is driver/queue.rs: full cycles back to back by every goroutine (worker ids from 1), each operation
// and the cycle timed; once every goroutine has stopped, the allocation probe.
func driveQueue(cell *Cell, a Approach) (Measurement, error) {
	run := beginRun(cell, nil, queueOperations, true)
	var wg sync.WaitGroup
	for task := uint32(0); task < cell.Concurrency; task++ {
		rng := DeriveRng(cell.Seed, uint64(task))
		shard := run.stats.shard(int(task))
		owner := int64(task) + 1
		wg.Add(1)
		go func() {
			defer wg.Done()
			payload := rng.Text(jobPayloadLen)
			for {
				started := time.Now()
				if !started.Before(run.window.end) {
					return
				}
				var lat [3]time.Duration
				err := guard(func() (err error) {
					lat, err = queueCycle(a, owner, payload)
					return err
				})
				done := time.Now()
				if !run.window.counts(done) {
					continue
				}
				shard.mu.Lock()
				if err != nil {
					shard.recordError(err.Error())
				} else {
					for i, name := range queueOperations[:3] {
						shard.recordNamed(name, lat[i].Nanoseconds())
					}
					shard.recordNamed("cycle", done.Sub(started).Nanoseconds())
				}
				shard.mu.Unlock()
			}
		}()
	}
	m, total := run.finish(a, true)
	// Each goroutine stops after the cycle it is in when the window closes; the probe runs alone after them.
	wg.Wait()
	probe, err := queueProbe(a, cell.Seed)
	if err != nil {
		return m, err
	}
	for _, name := range queueOperations {
		per := probe[name]
		allocs := float64(per[0]) / queueProbeCycles
		bytes := float64(per[1]) / queueProbeCycles
		m.Operations = append(m.Operations, NamedOp{
			Name:            name,
			Stats:           total.namedStats(name, m.WallSecs),
			AllocsPerOp:     &allocs,
			AllocBytesPerOp: &bytes,
		})
	}
	return m, nil
}

// queueProbe counts Go heap allocations (runtime.MemStats Mallocs and TotalAlloc, every goroutine's) around each
// operation of queueProbeCycles cycles run one at a time by one goroutine, as the Rust probe does.
func queueProbe(a Approach, seed uint64) (map[string][2]uint64, error) {
	rng := DeriveRng(seed, math.MaxUint64-2)
	payload := rng.Text(jobPayloadLen)
	const owner = 0
	totals := map[string][2]uint64{}
	add := func(name string, before, after *runtime.MemStats) {
		t := totals[name]
		t[0] += after.Mallocs - before.Mallocs
		t[1] += after.TotalAlloc - before.TotalAlloc
		totals[name] = t
	}
	var cycleStart, published, claimed, acked runtime.MemStats
	for i := 0; i < queueProbeCycles; i++ {
		createdAt := nowMs()
		now := nowMs()
		runtime.ReadMemStats(&cycleStart)
		if err := a.Publish(payload, createdAt); err != nil {
			return nil, fmt.Errorf("probe: publish: %w", err)
		}
		runtime.ReadMemStats(&published)
		id, ok, err := a.Claim(owner, now)
		if err != nil {
			return nil, fmt.Errorf("probe: claim: %w", err)
		}
		if !ok {
			return nil, fmt.Errorf("probe: claim found no unclaimed job")
		}
		runtime.ReadMemStats(&claimed)
		if err := a.Ack(id, owner); err != nil {
			return nil, fmt.Errorf("probe: ack: %w", err)
		}
		runtime.ReadMemStats(&acked)
		add("publish", &cycleStart, &published)
		add("claim", &published, &claimed)
		add("ack", &claimed, &acked)
		add("cycle", &cycleStart, &acked)
	}
	return totals, nil
}

// schedule is pacing.rs's `Schedule`: write k of a database is due at phase + k × period after the cell starts.
type schedule struct {
	period time.Duration
	phase  time.Duration
}

func scheduleFor(period time.Duration, db, databases int) schedule {
	if databases < 1 {
		databases = 1
	}
	phase := uint64(period.Nanoseconds()) * uint64(db%databases) / uint64(databases)
	return schedule{period, time.Duration(phase)}
}

func (s schedule) tick(k uint64) time.Duration { return s.phase + s.period*time.Duration(k) }

func (s schedule) ticksBefore(offset time.Duration) uint64 {
	if offset <= s.phase || s.period == 0 {
		return 0
	}
	d := uint64(offset - s.phase)
	p := uint64(s.period)
	return (d + p - 1) / p
}

func (s schedule) ticksIn(from, to time.Duration) uint64 {
	a, b := s.ticksBefore(to), s.ticksBefore(from)
	if a < b {
		return 0
	}
	return a - b
}

// expectedWrites is multi_db.rs's `expected`.
func expectedWrites(cell *Cell, paced bool, delay time.Duration, databases int) *uint64 {
	if delay == 0 {
		return nil
	}
	var n uint64
	if !paced {
		n = cell.DurationMs / uint64(delay.Milliseconds()) * uint64(databases)
	} else {
		from := time.Duration(cell.WarmupMs) * time.Millisecond
		to := from + time.Duration(cell.DurationMs)*time.Millisecond
		for db := 0; db < databases; db++ {
			n += scheduleFor(delay, db, databases).ticksIn(from, to)
		}
	}
	return &n
}

// driveMultiDb is driver/multi_db.rs: per database a writer (blocking: the delay slept inside the write
// transaction, next write when it returns; paced: one write due every delay on a schedule staggered across
// databases), and the readers of the reader plan running the account-history JOIN.
func driveMultiDb(cell *Cell, a Approach) Measurement {
	settings := cell.MultiDb
	run := beginRun(cell, []OpKind{Read, Write}, nil, false)
	databases := int(settings.NumDatabases)
	delay := time.Duration(settings.WriteDelayMs) * time.Millisecond
	paced := settings.WriteMode == "paced"
	goroutine := 0
	for db := 0; db < databases; db++ {
		db := db
		gen := ledgerWriting(cell.Seed, db)
		shard := run.stats.shard(goroutine)
		goroutine++
		if !paced {
			go func() {
				for {
					started := time.Now()
					if !started.Before(run.window.end) {
						return
					}
					block := gen.NextBlock()
					err := guard(func() error { return a.PacedWrite(db, &block, delay) })
					record(shard, run.window, Write, started, err)
				}
			}()
		} else {
			sched := scheduleFor(delay, db, databases)
			go func() {
				for k := uint64(0); ; k++ {
					due := run.window.start.Add(sched.tick(k))
					if !due.Before(run.window.end) {
						return
					}
					time.Sleep(time.Until(due))
					started := time.Now()
					block := gen.NextBlock()
					err := guard(func() error { return a.PacedWrite(db, &block, 0) })
					done := time.Now()
					if !due.Before(run.window.measureStart) && done.Before(run.window.end) {
						store(shard, Write, done.Sub(started), err)
					}
				}
			}()
		}
	}
	expected := expectedWrites(cell, paced, delay, databases)
	type reader struct {
		fixed  int // database, or -1 for any
		stream uint64
	}
	var plan []reader
	if settings.TotalReaders != nil {
		for r := uint32(0); r < *settings.TotalReaders; r++ {
			plan = append(plan, reader{-1, uint64(r)})
		}
	} else {
		for db := 0; db < databases; db++ {
			for r := uint32(0); r < settings.Readers; r++ {
				plan = append(plan, reader{db, uint64(db)<<20 | uint64(r)})
			}
		}
	}
	for _, rd := range plan {
		rd := rd
		rng := DeriveRng(cell.Seed, rd.stream)
		shard := run.stats.shard(goroutine)
		goroutine++
		go func() {
			for {
				started := time.Now()
				if !started.Before(run.window.end) {
					return
				}
				db := rd.fixed
				if db < 0 {
					db = int(rng.Below(uint64(max(databases, 1))))
				}
				account := rng.Between(1, ledgerAccounts)
				err := guard(func() error { return a.JoinRead(db, account) })
				record(shard, run.window, Read, started, err)
			}
		}()
	}
	m, total := run.finish(a, false)
	if expected != nil {
		completed := total.count(Write)
		ratio := 1.0
		if *expected != 0 {
			ratio = math.Min(float64(completed)/float64(*expected), 1.0)
		}
		m.WriteCompletion = &Completion{Expected: *expected, Completed: completed, Ratio: ratio}
	}
	return m
}
