package main

import (
	"math"
	"sync"

	hdr "github.com/HdrHistogram/hdrhistogram-go"
)

// maxErrorSamples is MAX_ERROR_SAMPLES.
const maxErrorSamples = 5

// Histograms track 1 ns to one hour with three significant figures, like lab-core's (which auto-resize); a
// longer latency is clamped to the hour.
const histogramMaxNs = int64(3_600_000_000_000)

func newHistogram() *hdr.Histogram { return hdr.New(1, histogramMaxNs, 3) }

// OpKind is which histogram an operation belongs to.
type OpKind int

const (
	Read OpKind = iota
	Write
)

// taskStats is one block of measurements (lab-core's `TaskStats`). Histograms are made before the window opens,
// so recording allocates nothing (the queue counts the process's allocations in the window).
type taskStats struct {
	mu      sync.Mutex
	reads   *hdr.Histogram
	writes  *hdr.Histogram
	named   []namedHistogram
	errors  uint64
	samples []string
}

type namedHistogram struct {
	name string
	h    *hdr.Histogram
}

func newTaskStats(kinds []OpKind, names []string) *taskStats {
	s := &taskStats{}
	for _, k := range kinds {
		switch k {
		case Read:
			s.reads = newHistogram()
		case Write:
			s.writes = newHistogram()
		}
	}
	for _, n := range names {
		s.named = append(s.named, namedHistogram{n, newHistogram()})
	}
	return s
}

func recordInto(h **hdr.Histogram, nanos int64) {
	if *h == nil {
		*h = newHistogram()
	}
	if nanos < 1 {
		nanos = 1
	}
	if nanos > histogramMaxNs {
		nanos = histogramMaxNs
	}
	_ = (*h).RecordValue(nanos)
}

func (s *taskStats) record(kind OpKind, nanos int64) {
	if kind == Read {
		recordInto(&s.reads, nanos)
	} else {
		recordInto(&s.writes, nanos)
	}
}

func (s *taskStats) recordNamed(name string, nanos int64) {
	for i := range s.named {
		if s.named[i].name == name {
			recordInto(&s.named[i].h, nanos)
			return
		}
	}
	s.named = append(s.named, namedHistogram{name, nil})
	recordInto(&s.named[len(s.named)-1].h, nanos)
}

func (s *taskStats) recordError(message string) {
	s.errors++
	if len(s.samples) < maxErrorSamples && !contains(s.samples, message) {
		s.samples = append(s.samples, message)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func mergeInto(dst **hdr.Histogram, src *hdr.Histogram) {
	if src == nil {
		return
	}
	if *dst == nil {
		*dst = newHistogram()
	}
	(*dst).Merge(src)
}

func (s *taskStats) merge(o *taskStats) {
	mergeInto(&s.reads, o.reads)
	mergeInto(&s.writes, o.writes)
	for _, n := range o.named {
		found := false
		for i := range s.named {
			if s.named[i].name == n.name {
				mergeInto(&s.named[i].h, n.h)
				found = true
			}
		}
		if !found {
			var h *hdr.Histogram
			mergeInto(&h, n.h)
			s.named = append(s.named, namedHistogram{n.name, h})
		}
	}
	s.errors += o.errors
	for _, m := range o.samples {
		if len(s.samples) < maxErrorSamples && !contains(s.samples, m) {
			s.samples = append(s.samples, m)
		}
	}
}

func (s *taskStats) count(kind OpKind) uint64 {
	h := s.reads
	if kind == Write {
		h = s.writes
	}
	if h == nil {
		return 0
	}
	return uint64(h.TotalCount())
}

func (s *taskStats) opStats(kind OpKind, wallSecs float64) OpStats {
	if kind == Read {
		return histogramStats(s.reads, wallSecs)
	}
	return histogramStats(s.writes, wallSecs)
}

func (s *taskStats) namedStats(name string, wallSecs float64) OpStats {
	for _, n := range s.named {
		if n.name == name {
			return histogramStats(n.h, wallSecs)
		}
	}
	return OpStats{}
}

// valueAtQuantile is the Rust hdrhistogram crate's `value_at_quantile`: the highest value equivalent to the
// first recorded value at which the running count reaches ceil(q × total) (at least 1).
func valueAtQuantile(h *hdr.Histogram, q float64) int64 {
	target := int64(math.Ceil(q * float64(h.TotalCount())))
	if target < 1 {
		target = 1
	}
	var running int64
	for _, bar := range h.Distribution() {
		running += bar.Count
		if bar.Count > 0 && running >= target {
			return bar.To
		}
	}
	return h.Max()
}

// histogramStats is lab-core's `histogram_stats`: µs from ns, ops/s over the window.
func histogramStats(h *hdr.Histogram, wallSecs float64) OpStats {
	if h == nil || h.TotalCount() == 0 {
		return OpStats{}
	}
	us := func(n int64) float64 { return float64(n) / 1000.0 }
	ops := uint64(h.TotalCount())
	perSec := 0.0
	if wallSecs > 0 {
		perSec = float64(ops) / wallSecs
	}
	return OpStats{
		Ops:       ops,
		OpsPerSec: perSec,
		AvgUs:     h.Mean() / 1000.0,
		P50Us:     us(valueAtQuantile(h, 0.50)),
		P99Us:     us(valueAtQuantile(h, 0.99)),
		MaxUs:     us(h.Max()),
	}
}

// statsSink is where client goroutines record: one block per shard (GOMAXPROCS shards, the counterpart of
// lab-core's block per worker thread), goroutine i recording into shard i mod shards; merged when the window
// closes.
type statsSink struct {
	shards []*taskStats
}

func newStatsSink(shards int, kinds []OpKind, names []string) *statsSink {
	if shards < 1 {
		shards = 1
	}
	s := &statsSink{}
	for i := 0; i < shards; i++ {
		s.shards = append(s.shards, newTaskStats(kinds, names))
	}
	return s
}

func (s *statsSink) shard(i int) *taskStats { return s.shards[i%len(s.shards)] }

func (s *statsSink) merged() *taskStats {
	total := &taskStats{}
	for _, b := range s.shards {
		b.mu.Lock()
		total.merge(b)
		b.mu.Unlock()
	}
	return total
}
