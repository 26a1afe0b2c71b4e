package main

import (
	"io"
	"os"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// forMachine is `Environment::for_machine`.
func forMachine(runner string) Environment {
	kernel := "unknown"
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		kernel = strings.TrimSpace(string(b))
	}
	return Environment{
		Runner:   runner,
		CPUModel: cpuModel(),
		CPUs:     uint32(runtime.NumCPU()),
		Kernel:   kernel,
		Date:     time.Now().UTC().Format("2006-01-02T15:04:05Z"),
	}
}

func cpuModel() string {
	b, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return "unknown"
	}
	for _, key := range []string{"model name", "Model", "Hardware", "cpu model"} {
		for _, line := range strings.Split(string(b), "\n") {
			k, v, ok := strings.Cut(line, ":")
			if ok && strings.TrimSpace(k) == key && strings.TrimSpace(v) != "" {
				return strings.TrimSpace(v)
			}
		}
	}
	return "unknown"
}

// cpuTime is user + system CPU time of the whole process (getrusage).
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// raiseOpenFilesLimit is `raise_open_files_limit` (Go's runtime already raises the soft limit at start-up; this
// covers an unlimited hard limit too).
func raiseOpenFilesLimit() (uint64, error) {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	target := lim.Max
	if lim.Max == ^uint64(0) { // RLIM_INFINITY
		target = 1 << 20
		if b, err := os.ReadFile("/proc/sys/fs/nr_open"); err == nil {
			if n, err := strconv.ParseUint(strings.TrimSpace(string(b)), 10, 64); err == nil {
				target = n
			}
		}
	}
	if lim.Cur >= target {
		return lim.Cur, nil
	}
	lim.Cur = target
	if err := syscall.Setrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return 0, err
	}
	return target, nil
}

func openFilesSoftLimit() *uint64 {
	var lim syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &lim); err != nil {
		return nil
	}
	v := lim.Cur
	return &v
}

// statusFile is `/proc/self/status`, opened once (before the approach can use up the descriptors) and read again
// on each sample.
type statusFile struct{ f *os.File }

func openStatus() statusFile {
	f, _ := os.Open("/proc/self/status")
	return statusFile{f}
}

func (s statusFile) field(key string) *uint64 {
	if s.f == nil {
		return nil
	}
	if _, err := s.f.Seek(0, io.SeekStart); err != nil {
		return nil
	}
	b, err := io.ReadAll(s.f)
	if err != nil {
		return nil
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, key); ok {
			fields := strings.Fields(rest)
			if len(fields) == 0 {
				return nil
			}
			n, err := strconv.ParseUint(fields[0], 10, 64)
			if err != nil {
				return nil
			}
			return &n
		}
	}
	return nil
}

func (s statusFile) threads() *uint64 { return s.field("Threads:") }

func (s statusFile) rssBytes() *uint64 {
	kb := s.field("VmRSS:")
	if kb == nil {
		return nil
	}
	b := *kb * 1024
	return &b
}
