package main

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

type binaries struct {
	etcd, etcdctl, etcdlead, child string
	// traced is etcdlead built with the tag etcdlead_trace, for the step
	// tables (internal/trace); every figure is taken with etcdlead.
	traced string
}

// build compiles what the bench runs, from this checkout and the versions
// pinned in go.mod, without the race detector.
func build(ctx context.Context, root, dir, etcdleadBin string) (binaries, error) {
	b := binaries{
		etcd:     filepath.Join(dir, "etcd"),
		etcdctl:  filepath.Join(dir, "etcdctl"),
		etcdlead: filepath.Join(dir, "etcdlead"),
		child:    filepath.Join(dir, "child"),
		traced:   filepath.Join(dir, "traced", "etcdlead"),
	}
	const tags, traced = "urfave_cli_no_docs", "urfave_cli_no_docs,etcdlead_trace"
	jobs := [][3]string{
		{b.etcd, "./testdata/etcd", tags},
		{b.etcdctl, "go.etcd.io/etcd/etcdctl/v3", tags},
		{b.child, "./scripts/benchmain/child", tags},
		{b.traced, ".", traced},
		{filepath.Join(dir, "traced", "etcdlead-keeper"), "./cmd/etcdlead-keeper", traced},
	}
	// etcdlead finds its keeper beside itself: a prebuilt etcdlead runs the
	// keeper built beside it, or, with none there, its self-exec keeper.
	if etcdleadBin == "" {
		jobs = append(jobs, [3]string{b.etcdlead, ".", tags}, [3]string{filepath.Join(dir, "etcdlead-keeper"), "./cmd/etcdlead-keeper", tags})
	} else {
		b.etcdlead = etcdleadBin
	}
	for _, j := range jobs {
		// Built as the archives and packages are (README.md, "Install").
		cmd := exec.CommandContext(ctx, "go", "build", "-race=false", "-tags", j[2], "-o", j[0], j[1])
		cmd.Dir = root
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Run(); err != nil {
			return b, fmt.Errorf("go build %s: %v\n%s", j[1], err, out.Bytes())
		}
	}
	return b, nil
}

func moduleRoot() (string, error) {
	out, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		return "", fmt.Errorf("go env GOMOD: %w", err)
	}
	mod := strings.TrimSpace(string(out))
	if !filepath.IsAbs(mod) {
		return "", fmt.Errorf("not inside a module (GOMOD=%q): run scripts/bench from the checkout", mod)
	}
	return filepath.Dir(mod), nil
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// cleanEnv drops the variables that would let the developer's shell steer
// etcd, etcdctl or etcdlead.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "ETCD_") || strings.HasPrefix(kv, "ETCDCTL_") || strings.HasPrefix(kv, "ETCDLEAD_") {
			continue
		}
		env = append(env, kv)
	}
	return env
}

type etcdProc struct {
	cmd      *exec.Cmd
	done     chan struct{}
	endpoint string
	dataDir  string
	log      string
}

// startEtcd starts one member with its data on disk: no --unsafe-no-fsync,
// so every commit is fsynced as in production.
func startEtcd(ctx context.Context, bin, dir string, env []string, extra ...string) (*etcdProc, error) {
	for attempt := 1; ; attempt++ {
		p, err := tryStartEtcd(ctx, bin, dir, env, attempt, extra)
		if err == nil || attempt == 3 || ctx.Err() != nil {
			return p, err
		}
	}
}

func tryStartEtcd(ctx context.Context, bin, dir string, env []string, attempt int, extra []string) (*etcdProc, error) {
	cport, err := freePort()
	if err != nil {
		return nil, err
	}
	pport, err := freePort()
	if err != nil {
		return nil, err
	}
	p := &etcdProc{
		endpoint: fmt.Sprintf("127.0.0.1:%d", cport),
		dataDir:  filepath.Join(dir, fmt.Sprintf("etcd-data-%d", attempt)),
		log:      filepath.Join(dir, "logs", "etcd.log"),
		done:     make(chan struct{}),
	}
	peer := fmt.Sprintf("http://127.0.0.1:%d", pport)
	logf, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	p.cmd = exec.Command(bin,
		"--name", "bench",
		"--data-dir", p.dataDir,
		"--listen-client-urls", "http://"+p.endpoint,
		"--advertise-client-urls", "http://"+p.endpoint,
		"--listen-peer-urls", peer,
		"--initial-advertise-peer-urls", peer,
		"--initial-cluster", "bench="+peer,
		"--initial-cluster-state", "new",
		"--log-level", "error")
	p.cmd.Args = append(p.cmd.Args, extra...)
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		return nil, err
	}
	go func() {
		_ = p.cmd.Wait()
		close(p.done)
	}()
	cli, err := newClient(p.endpoint)
	if err != nil {
		p.stop()
		return nil, err
	}
	defer cli.Close()
	deadline := time.Now().Add(30 * time.Second)
	for {
		rctx, cancel := context.WithTimeout(ctx, time.Second)
		_, err := cli.Get(rctx, "bench/ready")
		cancel()
		if err == nil {
			return p, nil
		}
		select {
		case <-p.done:
			return nil, fmt.Errorf("etcd exited during start-up; see %s", p.log)
		case <-ctx.Done():
			p.stop()
			return nil, ctx.Err()
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			p.stop()
			return nil, fmt.Errorf("etcd not serving after 30s: %v", err)
		}
	}
}

func (p *etcdProc) stop() {
	if p == nil || p.cmd.Process == nil {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

func newClient(endpoint string) (*clientv3.Client, error) {
	return clientv3.New(clientv3.Config{
		Endpoints:   []string{endpoint},
		DialTimeout: 5 * time.Second,
		Logger:      zap.NewNop(),
	})
}

// fsType names the file system that holds dir, so that the report can say
// whether the WAL's fsyncs reached a disk.
func fsType(dir string) string {
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		return "unknown"
	}
	names := map[int64]string{
		0xEF53: "ext4", 0x58465342: "xfs", 0x9123683E: "btrfs", 0x01021994: "tmpfs",
		0x794C7630: "overlayfs", 0x2FC12FC1: "zfs", 0x6969: "nfs", 0x65735546: "fuse",
	}
	if n, ok := names[int64(st.Type)]; ok {
		return n
	}
	return fmt.Sprintf("0x%x", st.Type)
}

// machine describes where the bench ran.
type machine struct {
	CPU, Kernel, Memory, GoVersion, EtcdVersion, EtcdctlVersion, Etcdlead, FS string
	Generator                                                                 string // commit of scripts/benchmain
	ChildLines                                                                int    // lines of the bench's child program
	Cores                                                                     int
	LoadBefore, LoadAfter                                                     string
	BinMB                                                                     map[string]float64 // executable sizes
	BusyPercent                                                               float64            // whole machine, over the run
}

func describeMachine(root string, bins binaries, dataDir string, prebuilt bool) machine {
	m := machine{Cores: runtime.NumCPU(), FS: fsType(dataDir), BinMB: map[string]float64{}}
	for k, p := range map[string]string{"etcdlead": bins.etcdlead, "etcdctl": bins.etcdctl, "child": bins.child} {
		if st, err := os.Stat(p); err == nil {
			m.BinMB[k] = float64(st.Size()) / (1 << 20)
		}
	}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if k, v, ok := strings.Cut(l, ":"); ok && strings.TrimSpace(k) == "model name" {
				m.CPU = strings.TrimSpace(v)
				break
			}
		}
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = "Linux " + strings.TrimSpace(string(b))
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kb int64
		fmt.Sscanf(strings.SplitN(string(b), "\n", 2)[0], "MemTotal: %d kB", &kb)
		m.Memory = fmt.Sprintf("%.0f GiB", float64(kb)/(1<<20))
	}
	m.GoVersion = cmdOut(root, "go", "env", "GOVERSION")
	m.EtcdVersion = cmdOut(root, "go", "list", "-m", "-f", "{{.Version}}", "go.etcd.io/etcd/server/v3")
	for _, l := range strings.Split(cmdOut(root, bins.etcdctl, "version"), "\n") {
		if v, ok := strings.CutPrefix(l, "etcdctl version: "); ok {
			m.EtcdctlVersion = v
		}
	}
	rev := cmdOut(root, "git", "rev-parse", "--short", "HEAD")
	// Only changes that reach the etcdlead binary count: its Go files
	// (tests, scripts and testdata apart), go.mod, go.sum.
	var dirty []string
	// Not cmdOut: trimming would eat the first line's status column.
	status, _ := exec.Command("git", "-C", root, "status", "--porcelain").Output()
	for _, l := range strings.Split(string(status), "\n") {
		if len(l) < 4 {
			continue
		}
		path := strings.TrimSpace(l[3:])
		if i := strings.Index(path, " -> "); i >= 0 {
			path = path[i+4:]
		}
		code := strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, "_test.go") &&
			!strings.HasPrefix(path, "scripts/") && !strings.HasPrefix(path, "testdata/") && !strings.HasPrefix(path, "internal/")
		if code || path == "go.mod" || path == "go.sum" {
			dirty = append(dirty, path)
		}
	}
	if len(dirty) > 0 {
		rev += " plus uncommitted changes to " + strings.Join(dirty, ", ")
	}
	m.Etcdlead = "commit " + rev
	m.Generator = "scripts/benchmain at commit " + cmdOut(root, "git", "rev-parse", "--short", "HEAD")
	if st := cmdOut(root, "git", "status", "--porcelain", "--", "scripts/benchmain"); st != "" && st != "?" {
		m.Generator += " plus uncommitted changes to it"
	}
	if b, err := os.ReadFile(filepath.Join(root, "scripts", "benchmain", "child", "main.go")); err == nil {
		m.ChildLines = strings.Count(string(b), "\n")
	}
	if prebuilt {
		m.Etcdlead = "prebuilt " + bins.etcdlead
	}
	m.LoadBefore = loadavg()
	return m
}

func cmdOut(dir, name string, args ...string) string {
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		return "?"
	}
	return strings.TrimSpace(string(out))
}

func loadavg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "?"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "?"
	}
	return strings.Join(f[:3], " ")
}

// cpuTimes reads the machine's busy and total jiffies from /proc/stat.
func cpuTimes() (busy, total float64) {
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(strings.SplitN(string(b), "\n", 2)[0])
	for i, s := range f[1:] {
		var v float64
		fmt.Sscan(s, &v)
		total += v
		if i != 3 && i != 4 { // idle, iowait
			busy += v
		}
	}
	return busy, total
}
