package ops

import (
	"bytes"
	"io"
	"strings"

	vm "github.com/VictoriaMetrics/metrics"
)

// family is how /metrics publishes one family of the Go runtime or the
// process that the library writes: as the library names and types it
// where name and typ are "", and always with a HELP text, which the
// library leaves out.
type family struct{ name, typ, help string }

// runtimeFamilies are the Go and process families the library writes on
// Linux, keyed by the library's name. Those it names or types against the
// exposition format's rules (a counter without _total, a gauge ending in
// _count or _total) are published under a name and type that follow them,
// so that every series passes `promtool check metrics`. A family missing
// here is left out of /metrics rather than served unchecked
// (TestMetricsPassPromtool catches it before a release does).
var runtimeFamilies = map[string]family{
	"go_cgo_calls_count":                  {name: "go_cgo_calls_total", help: "Calls from Go to C made by the process."},
	"go_cpu_count":                        {name: "go_cpus", help: "Logical CPUs the process may use."},
	"go_gc_cpu_seconds_total":             {help: "CPU time spent in garbage collection, estimated by the Go runtime."},
	"go_gc_duration_seconds":              {help: "Stop-the-world pauses of the garbage collector: quantiles of the last 256, their sum and count of all."},
	"go_gc_forced_count":                  {name: "go_gc_forced_total", help: "Garbage collections forced by the program (runtime.GC)."},
	"go_gc_mark_assist_cpu_seconds_total": {help: "CPU time goroutines spent helping the garbage collector mark, estimated by the Go runtime."},
	"go_gc_pauses_seconds":                {help: "Stop-the-world pauses of the garbage collector (the Go runtime's histogram, without _sum and _count)."},
	"go_gomaxprocs":                       {help: "GOMAXPROCS: how many threads may run Go code at once."},
	"go_goroutines":                       {help: "Goroutines that exist now."},
	"go_info":                             {help: "1, labelled with the Go version that built the binary."},
	"go_info_ext":                         {help: "1, labelled with the compiler, GOARCH, GOOS and GOROOT that built the binary."},
	"go_memlimit_bytes":                   {help: "The Go runtime's soft memory limit (GOMEMLIMIT)."},
	"go_memstats_alloc_bytes":             {help: "Bytes of heap objects allocated and not yet freed."},
	"go_memstats_alloc_bytes_total":       {help: "Bytes allocated for heap objects since the start."},
	"go_memstats_buck_hash_sys_bytes":     {help: "Bytes of memory in profiling bucket hash tables."},
	"go_memstats_frees_total":             {help: "Heap objects freed since the start."},
	"go_memstats_gc_cpu_fraction":         {help: "Fraction of the available CPU time used by the garbage collector since the start."},
	"go_memstats_gc_sys_bytes":            {help: "Bytes of memory in garbage collection metadata."},
	"go_memstats_heap_alloc_bytes":        {help: "Bytes of heap objects allocated and not yet freed."},
	"go_memstats_heap_idle_bytes":         {help: "Bytes in idle (unused) heap spans."},
	"go_memstats_heap_inuse_bytes":        {help: "Bytes in in-use heap spans."},
	"go_memstats_heap_objects":            {help: "Heap objects allocated and not yet freed."},
	"go_memstats_heap_released_bytes":     {help: "Bytes of heap memory returned to the operating system."},
	"go_memstats_heap_sys_bytes":          {help: "Bytes of heap memory obtained from the operating system."},
	"go_memstats_last_gc_time_seconds":    {help: "When the last garbage collection ended, in seconds since the Unix epoch."},
	"go_memstats_lookups_total":           {help: "Pointer lookups made by the runtime since the start."},
	"go_memstats_mallocs_total":           {help: "Heap objects allocated since the start."},
	"go_memstats_mcache_inuse_bytes":      {help: "Bytes of allocated mcache structures."},
	"go_memstats_mcache_sys_bytes":        {help: "Bytes of memory obtained from the operating system for mcache structures."},
	"go_memstats_mspan_inuse_bytes":       {help: "Bytes of allocated mspan structures."},
	"go_memstats_mspan_sys_bytes":         {help: "Bytes of memory obtained from the operating system for mspan structures."},
	"go_memstats_next_gc_bytes":           {help: "Heap size at which the next garbage collection is due."},
	"go_memstats_other_sys_bytes":         {help: "Bytes of memory in other runtime allocations."},
	"go_memstats_stack_inuse_bytes":       {help: "Bytes in stack spans."},
	"go_memstats_stack_sys_bytes":         {help: "Bytes of stack memory obtained from the operating system."},
	"go_memstats_sys_bytes":               {help: "Bytes of memory obtained from the operating system, in all."},
	"go_mutex_wait_seconds_total":         {help: "Time goroutines spent blocked on a sync.Mutex or sync.RWMutex, approximately."},
	"go_scavenge_cpu_seconds_total":       {help: "CPU time spent returning memory to the operating system, estimated by the Go runtime."},
	"go_sched_latencies_seconds":          {help: "Time goroutines spent runnable before they ran (the Go runtime's histogram, without _sum and _count)."},
	"go_threads":                          {help: "Operating system threads the Go runtime created."},

	"process_cgroup_cpu_throttled_seconds_total":    {help: "Time the process's cgroup was throttled by its CPU quota since the process started."},
	"process_cpu_seconds_system_total":              {help: "CPU time the process spent in the kernel."},
	"process_cpu_seconds_total":                     {help: "CPU time the process spent, user and system."},
	"process_cpu_seconds_user_total":                {help: "CPU time the process spent in user mode."},
	"process_io_read_bytes_total":                   {typ: "counter", help: "Bytes the process read with read-like system calls, from storage or not."},
	"process_io_read_syscalls_total":                {typ: "counter", help: "Read-like system calls the process made."},
	"process_io_storage_read_bytes_total":           {typ: "counter", help: "Bytes the process caused to be read from storage."},
	"process_io_storage_written_bytes_total":        {typ: "counter", help: "Bytes the process caused to be written to storage."},
	"process_io_write_syscalls_total":               {typ: "counter", help: "Write-like system calls the process made."},
	"process_io_written_bytes_total":                {typ: "counter", help: "Bytes the process wrote with write-like system calls, to storage or not."},
	"process_major_pagefaults_total":                {help: "Page faults of the process that needed a read from storage."},
	"process_max_fds":                               {help: "The process's limit on open file descriptors."},
	"process_minor_pagefaults_total":                {help: "Page faults of the process that needed no read from storage."},
	"process_num_threads":                           {help: "Threads of the process."},
	"process_open_fds":                              {help: "File descriptors the process has open."},
	"process_pressure_cpu_stalled_seconds_total":    {help: "Time all tasks of the process's cgroup waited for a CPU at once (PSI full), since the process started."},
	"process_pressure_cpu_waiting_seconds_total":    {help: "Time some task of the process's cgroup waited for a CPU (PSI some), since the process started."},
	"process_pressure_io_stalled_seconds_total":     {help: "Time all tasks of the process's cgroup waited for I/O at once (PSI full), since the process started."},
	"process_pressure_io_waiting_seconds_total":     {help: "Time some task of the process's cgroup waited for I/O (PSI some), since the process started."},
	"process_pressure_memory_stalled_seconds_total": {help: "Time all tasks of the process's cgroup waited for memory at once (PSI full), since the process started."},
	"process_pressure_memory_waiting_seconds_total": {help: "Time some task of the process's cgroup waited for memory (PSI some), since the process started."},
	"process_resident_memory_anon_bytes":            {help: "Resident anonymous memory of the process."},
	"process_resident_memory_bytes":                 {help: "Resident memory of the process."},
	"process_resident_memory_file_bytes":            {help: "Resident file-backed memory of the process."},
	"process_resident_memory_peak_bytes":            {help: "The most resident memory the process has had."},
	"process_resident_memory_shared_bytes":          {help: "Resident shared memory of the process."},
	"process_start_time_seconds":                    {help: "When the process started, in seconds since the Unix epoch."},
	"process_virtual_memory_bytes":                  {help: "Virtual memory of the process."},
	"process_virtual_memory_peak_bytes":             {help: "The most virtual memory the process has had."},
}

// writeRuntime writes the Go and process families, read now, each as
// runtimeFamilies publishes it. It returns the library's names of the
// families it left out.
func writeRuntime(w io.Writer) ([]string, error) {
	// publish finds families by the library's HELP lines. The switch is
	// global; etcdlead is the library's only user in the process.
	vm.ExposeMetadata(true)
	var page bytes.Buffer
	vm.WriteGoMetrics(&page)
	vm.WriteProcMetrics(&page)
	vm.WriteFDMetrics(&page)
	return publish(w, page.String(), runtimeFamilies)
}

// publish copies a page the library wrote with its metadata (a HELP and a
// TYPE line before each family's samples) to w, each family as known
// says, and leaves out each family known lacks, with its samples. It
// returns the library's names of those it left out.
func publish(w io.Writer, page string, known map[string]family) ([]string, error) {
	var out strings.Builder
	out.Grow(len(page) + len(page)/2)
	var left []string
	var from string // the library's name of the family being copied
	var f family    // how it is published; f.name is never ""
	for line := range strings.Lines(page) {
		line = strings.TrimSuffix(line, "\n")
		if name, ok := strings.CutPrefix(line, "# HELP "); ok {
			var ok bool
			if f, ok = known[name]; !ok {
				from = ""
				left = append(left, name)
				continue
			}
			from = name
			if f.name == "" {
				f.name = name
			}
			out.WriteString("# HELP " + f.name + " " + f.help + "\n")
			continue
		}
		if from == "" {
			continue // a family left out, or a sample before any HELP line
		}
		if typ, ok := strings.CutPrefix(line, "# TYPE "+from+" "); ok {
			if f.typ != "" {
				typ = f.typ
			}
			out.WriteString("# TYPE " + f.name + " " + typ + "\n")
			continue
		}
		// A sample's name is the family's, bare or with a suffix (_bucket,
		// _sum, _count); anything else is no sample of it.
		if rest, ok := strings.CutPrefix(line, from); ok && !strings.HasPrefix(line, "#") {
			out.WriteString(f.name + rest + "\n")
		}
	}
	_, err := io.WriteString(w, out.String())
	return left, err
}
