// Package kubernetes_test holds the example manifests of this directory to
// the Kubernetes API types and to what docs/containers.md says of them. It
// is a module of its own, so that k8s.io/api and what it requires stay out
// of etcdlead's go.mod and the etcd it builds; internal/e2e/deploy_test.go
// runs it with the suite.
package kubernetes_test

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/yaml"
)

// kinds are the types the manifests may hold; any other kind is refused,
// since a kind this test cannot decode is a kind it cannot check.
var kinds = map[string]func() any{
	"apps/v1 Deployment":                       func() any { return new(appsv1.Deployment) },
	"v1 Service":                               func() any { return new(corev1.Service) },
	"v1 ConfigMap":                             func() any { return new(corev1.ConfigMap) },
	"v1 ServiceAccount":                        func() any { return new(corev1.ServiceAccount) },
	"rbac.authorization.k8s.io/v1 Role":        func() any { return new(rbacv1.Role) },
	"rbac.authorization.k8s.io/v1 RoleBinding": func() any { return new(rbacv1.RoleBinding) },
	"policy/v1 PodDisruptionBudget":            func() any { return new(policyv1.PodDisruptionBudget) },
}

var docSeparator = regexp.MustCompile(`(?m)^---[ \t]*$`)

// decode splits a multi-document YAML file and decodes each document
// strictly into the type of its kind, so that a misspelt or misplaced
// field fails here rather than on a cluster.
func decode(data []byte) ([]any, error) {
	var out []any
	for i, doc := range docSeparator.Split(string(data), -1) {
		js, err := yaml.YAMLToJSON([]byte(doc))
		if err != nil {
			return nil, fmt.Errorf("document %d: %v", i+1, err)
		}
		if string(bytes.TrimSpace(js)) == "null" { // comments only
			continue
		}
		var tm metav1.TypeMeta
		if err := json.Unmarshal(js, &tm); err != nil {
			return nil, fmt.Errorf("document %d: %v", i+1, err)
		}
		newObj := kinds[tm.APIVersion+" "+tm.Kind]
		if newObj == nil {
			return nil, fmt.Errorf("document %d: unknown kind %q of apiVersion %q", i+1, tm.Kind, tm.APIVersion)
		}
		obj := newObj()
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			return nil, fmt.Errorf("document %d (%s): %v", i+1, tm.Kind, err)
		}
		out = append(out, obj)
	}
	return out, nil
}

// manifests are every object of every manifest file beside this test.
type manifests struct {
	deployment  *appsv1.Deployment
	service     *corev1.Service
	configMap   *corev1.ConfigMap
	account     *corev1.ServiceAccount
	role        *rbacv1.Role
	binding     *rbacv1.RoleBinding
	pdb         *policyv1.PodDisruptionBudget
	objectCount int
}

func load(t *testing.T) manifests {
	t.Helper()
	var files []string
	for _, pattern := range []string{"*.yaml", "*.yml", "*.json"} {
		m, err := filepath.Glob(pattern)
		if err != nil {
			t.Fatal(err)
		}
		files = append(files, m...)
	}
	var m manifests
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		objs, err := decode(data)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		for _, o := range objs {
			m.objectCount++
			dup := false
			switch o := o.(type) {
			case *appsv1.Deployment:
				dup, m.deployment = m.deployment != nil, o
			case *corev1.Service:
				dup, m.service = m.service != nil, o
			case *corev1.ConfigMap:
				dup, m.configMap = m.configMap != nil, o
			case *corev1.ServiceAccount:
				dup, m.account = m.account != nil, o
			case *rbacv1.Role:
				dup, m.role = m.role != nil, o
			case *rbacv1.RoleBinding:
				dup, m.binding = m.binding != nil, o
			case *policyv1.PodDisruptionBudget:
				dup, m.pdb = m.pdb != nil, o
			}
			if dup {
				t.Fatalf("%s: a second %T; the checks below pair one of each", f, o)
			}
		}
	}
	if m.deployment == nil || m.service == nil || m.configMap == nil || m.account == nil ||
		m.role == nil || m.binding == nil || m.pdb == nil {
		t.Fatalf("missing a kind: want one Deployment, Service, ConfigMap, ServiceAccount, Role, RoleBinding and PodDisruptionBudget in %v", files)
	}
	return m
}

func TestManifestsDecodeStrictly(t *testing.T) {
	if m := load(t); m.objectCount != 7 {
		t.Errorf("%d objects, want the 7 the checks below cover", m.objectCount)
	}
}

// The decoder refuses what it cannot check, so that the other tests see
// every field the API server would.
func TestDecodeRefuses(t *testing.T) {
	for name, doc := range map[string]string{
		"misspelt field":        "apiVersion: apps/v1\nkind: Deployment\nspec:\n  replica: 3\n",
		"field of another kind": "apiVersion: v1\nkind: Service\nspec:\n  replicas: 3\n",
		"duplicate field":       "apiVersion: v1\nkind: ConfigMap\ndata: {a: b}\ndata: {c: d}\n",
		"unknown kind":          "apiVersion: networking.k8s.io/v1\nkind: Ingress\n",
		"wrong version":         "apiVersion: apps/v1beta1\nkind: Deployment\n",
		"second document":       "apiVersion: v1\nkind: ServiceAccount\n---\napiVersion: v1\nkind: Service\nspec: {selctor: {}}\n",
	} {
		if _, err := decode([]byte(doc)); err == nil {
			t.Errorf("%s: decoded without an error", name)
		}
	}
	objs, err := decode([]byte("# only a comment\n---\napiVersion: v1\nkind: ServiceAccount\nmetadata: {name: a}\n---\n"))
	if err != nil || len(objs) != 1 {
		t.Errorf("comment-only documents: %d objects, %v; want 1, nil", len(objs), err)
	}
}

// oldExample is the Deployment docs/containers.md once gave: readiness on
// /leader and the default strategy. Its rollouts stalled until the
// progress deadline, and it never reported Available.
const oldExample = `
apiVersion: apps/v1
kind: Deployment
metadata:
  name: report-generator
spec:
  replicas: 3
  selector:
    matchLabels: {app: report-generator}
  template:
    metadata:
      labels: {app: report-generator}
    spec:
      terminationGracePeriodSeconds: 30   # longer than --kill-timeout
      containers:
        - name: worker
          image: registry.example/report-generator:1.4
          command: ["/usr/local/bin/etcdlead", "run", "--status-addr=:9464", "--"]
          args: ["/app/report-generator"]
          env:
            - {name: ETCDLEAD_ENDPOINTS, value: "https://etcd-0.etcd:2379,https://etcd-1.etcd:2379,https://etcd-2.etcd:2379"}
            - {name: ETCDLEAD_CACERT_FILE, value: /etc/etcd-ca/ca.pem}
            - {name: ETCDLEAD_ELECTION, value: report-generator}
            - name: ETCDLEAD_ID
              valueFrom: {fieldRef: {fieldPath: metadata.name}}
          ports:
            - {name: status, containerPort: 9464}
          readinessProbe:
            httpGet: {path: /leader, port: status}
            periodSeconds: 2
          livenessProbe:
            httpGet: {path: /status, port: status}
          volumeMounts:
            - {name: etcd-ca, mountPath: /etc/etcd-ca, readOnly: true}
      volumes:
        - name: etcd-ca
          configMap: {name: etcd-ca}
`

// fenceposts resolves a Deployment's surge and unavailability as the
// deployment controller does: the API server's defaults for what is unset
// (RollingUpdate, 25% and 25%), the surge rounded up and the
// unavailability down, at least one of them nonzero, and no more
// unavailable than there are replicas.
func fenceposts(d *appsv1.Deployment) (replicas, surge, unavailable int, err error) {
	replicas = 1
	if d.Spec.Replicas != nil {
		replicas = int(*d.Spec.Replicas)
	}
	s := d.Spec.Strategy
	if s.Type == "" {
		s.Type = appsv1.RollingUpdateDeploymentStrategyType
	}
	if s.Type != appsv1.RollingUpdateDeploymentStrategyType {
		return 0, 0, 0, fmt.Errorf("strategy %s: only a rolling update keeps candidates running through a rollout", s.Type)
	}
	quarter := intstr.FromString("25%")
	maxSurge, maxUnavailable := &quarter, &quarter
	if ru := s.RollingUpdate; ru != nil {
		if ru.MaxSurge != nil {
			maxSurge = ru.MaxSurge
		}
		if ru.MaxUnavailable != nil {
			maxUnavailable = ru.MaxUnavailable
		}
	}
	if surge, err = intstr.GetScaledValueFromIntOrPercent(maxSurge, replicas, true); err != nil {
		return 0, 0, 0, err
	}
	if unavailable, err = intstr.GetScaledValueFromIntOrPercent(maxUnavailable, replicas, false); err != nil {
		return 0, 0, 0, err
	}
	if surge == 0 && unavailable == 0 {
		unavailable = 1
	}
	unavailable = min(unavailable, replicas)
	return replicas, surge, unavailable, nil
}

// checkRollout says whether a rollout of d can always progress and d
// reports Available while healthy. It follows the deployment controller's
// first rolling step with no new pod Ready yet, the case where a new pod
// waits for something the old pods hold: the new ReplicaSet is scaled up
// by the surge, and then old pods may go only while the pods, less those
// that must stay available, less the new unready ones, leave room. Only
// the leader's pod is Ready when readiness probes /leader.
func checkRollout(d *appsv1.Deployment) error {
	replicas, surge, unavailable, err := fenceposts(d)
	if err != nil {
		return err
	}
	if replicas < 2 {
		return fmt.Errorf("%d replicas: no candidate waits to take over", replicas)
	}
	readyOld := replicas
	if probesLeadership(d) {
		readyOld = 1
	}
	minAvailable := replicas - unavailable
	if readyOld < minAvailable {
		return fmt.Errorf("never Available: %d of %d replicas Ready while healthy, and %d must be (maxUnavailable %d)",
			readyOld, replicas, minAvailable, unavailable)
	}
	allPods := replicas + surge
	newUnready := surge
	maxScaledDown := allPods - minAvailable - newUnready
	// Old pods go first if unready, then while the Ready ones exceed
	// minAvailable.
	removable := maxScaledDown > 0 && (replicas-readyOld > 0 || readyOld > minAvailable)
	if !removable {
		return fmt.Errorf("rollout stalls: with maxSurge %d and maxUnavailable %d of %d replicas, no old pod may go until a new one is Ready (%d pods - %d that must stay available - %d new unready = %d)",
			surge, unavailable, replicas, allPods, minAvailable, newUnready, maxScaledDown)
	}
	return nil
}

func probesLeadership(d *appsv1.Deployment) bool {
	for _, c := range d.Spec.Template.Spec.Containers {
		if p := c.ReadinessProbe; p != nil && p.HTTPGet != nil && p.HTTPGet.Path == "/leader" {
			return true
		}
	}
	return false
}

// checkProbes holds the worker container to docs/operating.md's advice:
// readiness independent of leadership, liveness on /status only.
func checkProbes(c corev1.Container) error {
	var errs []error
	r := c.ReadinessProbe
	switch {
	case r == nil || r.HTTPGet == nil:
		errs = append(errs, errors.New("no HTTP readiness probe"))
	case r.HTTPGet.Path == "/leader":
		errs = append(errs, errors.New("readiness on /leader: only the leader's pod is ever Ready"))
	case r.HTTPGet.Path != "/healthz":
		errs = append(errs, fmt.Errorf("readiness on %s, want /healthz: Ready once this pod reaches etcd", r.HTTPGet.Path))
	}
	l := c.LivenessProbe
	if l == nil || l.HTTPGet == nil || l.HTTPGet.Path != "/status" {
		errs = append(errs, errors.New("liveness must probe /status: /healthz and /leader fail on healthy pods"))
	}
	return errors.Join(errs...)
}

func worker(t *testing.T, d *appsv1.Deployment) corev1.Container {
	t.Helper()
	if n := len(d.Spec.Template.Spec.Containers); n != 1 {
		t.Fatalf("%d containers, want 1", n)
	}
	return d.Spec.Template.Spec.Containers[0]
}

func TestRolloutProgresses(t *testing.T) {
	d := load(t).deployment
	if d.Spec.Strategy.RollingUpdate == nil || d.Spec.Strategy.RollingUpdate.MaxUnavailable == nil {
		t.Error("no explicit maxUnavailable: the default, 25%, rounds down to 0 below four replicas")
	}
	if err := checkRollout(d); err != nil {
		t.Error(err)
	}
	// The same at every replica count someone may scale it to.
	for n := int32(2); n <= 10; n++ {
		scaled := d.DeepCopy()
		scaled.Spec.Replicas = &n
		if err := checkRollout(scaled); err != nil {
			t.Errorf("at %d replicas: %v", n, err)
		}
	}
	if err := checkProbes(worker(t, d)); err != nil {
		t.Error(err)
	}
}

// The checks catch the trap the old example fell into.
func TestOldExampleStalls(t *testing.T) {
	objs, err := decode([]byte(oldExample))
	if err != nil {
		t.Fatal(err)
	}
	d := objs[0].(*appsv1.Deployment)
	err = checkRollout(d)
	if err == nil || !strings.Contains(err.Error(), "never Available") {
		t.Errorf("old example: %v, want never Available", err)
	}
	if err := checkProbes(worker(t, d)); err == nil {
		t.Error("old example: readiness on /leader passed")
	}
	// The default strategy alone stalls a rollout at three replicas, even
	// with readiness that every pod passes.
	d.Spec.Template.Spec.Containers[0].ReadinessProbe.HTTPGet.Path = "/healthz"
	err = checkRollout(d)
	if err == nil || !strings.Contains(err.Error(), "rollout stalls") {
		t.Errorf("default strategy: %v, want rollout stalls", err)
	}
	// Both fenceposts 0: the controller lets one pod be unavailable.
	zero := intstr.FromInt32(0)
	d.Spec.Strategy.RollingUpdate = &appsv1.RollingUpdateDeployment{MaxSurge: &zero, MaxUnavailable: &zero}
	if _, surge, unavailable, err := fenceposts(d); err != nil || surge != 0 || unavailable != 1 {
		t.Errorf("0 and 0: surge %d, unavailable %d, %v; want 0, 1", surge, unavailable, err)
	}
}

// appLabels are the pod template's labels, which every replica has.
func appLabels(d *appsv1.Deployment) map[string]string { return d.Spec.Template.Labels }

func TestServiceSelectsLeaderOnly(t *testing.T) {
	m := load(t)
	pod := appLabels(m.deployment)
	sel := m.service.Spec.Selector
	if sel["role"] != "leader" {
		t.Errorf("service selector %v: no role: leader", sel)
	}
	if _, ok := pod["role"]; ok {
		t.Errorf("the pod template sets role=%s: every replica would get the leader's traffic", pod["role"])
	}
	for k, v := range pod {
		if sel[k] != v {
			t.Errorf("service selector %v lacks the pods' %s: %s, so it may pick another app's leader", sel, k, v)
		}
	}
	if len(sel) != len(pod)+1 {
		t.Errorf("service selector %v: want the pods' labels %v and role: leader only", sel, pod)
	}
	names := map[string]bool{}
	for _, p := range worker(t, m.deployment).Ports {
		names[p.Name] = true
	}
	for _, p := range m.service.Spec.Ports {
		if p.TargetPort.Type != intstr.String || !names[p.TargetPort.StrVal] {
			t.Errorf("service port %s: target %s is no named port of the worker", p.Name, p.TargetPort.String())
		}
	}
	if sel := m.pdb.Spec.Selector; sel == nil || len(sel.MatchLabels) != len(pod) {
		t.Errorf("disruption budget selects %v, want the pods' labels %v", sel, pod)
	} else {
		for k, v := range sel.MatchLabels {
			if pod[k] != v {
				t.Errorf("disruption budget selects %s=%s, which the pods do not have", k, v)
			}
		}
	}
}

func TestRoleLetsTheHookPatchPods(t *testing.T) {
	m := load(t)
	sa := m.deployment.Spec.Template.Spec.ServiceAccountName
	if sa == "" || sa != m.account.Name {
		t.Errorf("pods run as service account %q, the manifests create %q", sa, m.account.Name)
	}
	patch := false
	for _, r := range m.role.Rules {
		if slices.Contains(r.APIGroups, "") && slices.Contains(r.Resources, "pods") && slices.Contains(r.Verbs, "patch") && len(r.ResourceNames) == 0 {
			patch = true
		}
	}
	if !patch {
		t.Errorf("role %s does not grant patch on pods: %+v", m.role.Name, m.role.Rules)
	}
	ref := m.binding.RoleRef
	if ref.APIGroup != rbacv1.GroupName || ref.Kind != "Role" || ref.Name != m.role.Name {
		t.Errorf("role binding refers to %+v, not role %s", ref, m.role.Name)
	}
	bound := false
	for _, s := range m.binding.Subjects {
		if s.Kind == rbacv1.ServiceAccountKind && s.Name == sa && (s.Namespace == "" || s.Namespace == m.binding.Namespace) {
			bound = true
		}
	}
	if !bound {
		t.Errorf("role binding subjects %+v do not include service account %s", m.binding.Subjects, sa)
	}
}

// invocation is the etcdlead command line of the worker container: its
// command and args, or, behind the shell that clears a stale label, the
// args the shell execs.
func invocation(t *testing.T, c corev1.Container) (argv []string, prelude string) {
	t.Helper()
	argv = append(slices.Clone(c.Command), c.Args...)
	if len(c.Command) == 4 && c.Command[0] == "/bin/sh" && c.Command[1] == "-c" {
		prelude = c.Command[2]
		// exec, so that etcdlead is PID 1 and gets the runtime's SIGTERM.
		if !strings.HasSuffix(prelude, `exec "$@"`) {
			t.Errorf("the shell does not end by exec'ing its arguments: %q", prelude)
		}
		argv = c.Args
	}
	return argv, prelude
}

// defaultKillTimeout is --kill-timeout's default, as the help text of
// `etcdlead run` gives it.
func defaultKillTimeout(t *testing.T) time.Duration {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "internal", "cli", "testdata", "help", "run.txt"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`--kill-timeout DURATION[^(]*\(default\s+([0-9a-z.]+)`).FindSubmatch(data)
	if m == nil {
		t.Fatal("the help text of etcdlead run gives no default for --kill-timeout")
	}
	d, err := time.ParseDuration(string(m[1]))
	if err != nil {
		t.Fatalf("--kill-timeout's default %q: %v", m[1], err)
	}
	return d
}

// runOptions are the options and variables of `etcdlead run`, read from
// the help text internal/cli's TestHelp holds to the CLI's definition.
func runOptions(t *testing.T) map[string]bool {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("..", "..", "internal", "cli", "testdata", "help", "run.txt"))
	if err != nil {
		t.Fatal(err)
	}
	opts := map[string]bool{}
	flagRE := regexp.MustCompile(`^\s+(--[a-z][a-z-]*)`)
	envRE := regexp.MustCompile(`\$(ETCDLEAD_[A-Z_]+)`)
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		if m := flagRE.FindStringSubmatch(sc.Text()); m != nil {
			opts[m[1]] = true
		}
		for _, m := range envRE.FindAllStringSubmatch(sc.Text(), -1) {
			opts[m[1]] = true
		}
	}
	if !opts["--kill-timeout"] || !opts["ETCDLEAD_ELECTION"] {
		t.Fatalf("read no options from the help text: %v", opts)
	}
	return opts
}

func known(t *testing.T, opts map[string]bool, name string) bool {
	t.Helper()
	return opts[name]
}

// options are the --name=value words before "--", by name; a bare --name
// maps to "".
func options(argv []string) (map[string]string, []string, error) {
	opts := map[string]string{}
	for i, w := range argv {
		if w == "--" {
			return opts, argv[i+1:], nil
		}
		if !strings.HasPrefix(w, "--") {
			return nil, nil, fmt.Errorf("%q: write options as --name=value, so that each word is one option", w)
		}
		name, val, _ := strings.Cut(w, "=")
		opts[name] = val
	}
	return nil, nil, errors.New(`no "--" before the command`)
}

func TestCommandIsEtcdleadRun(t *testing.T) {
	m := load(t)
	c := worker(t, m.deployment)
	argv, _ := invocation(t, c)
	if len(argv) < 2 || filepath.Base(argv[0]) != "etcdlead" || argv[1] != "run" {
		t.Fatalf("the container runs %q, not etcdlead run", argv)
	}
	opts, command, err := options(argv[2:])
	if err != nil {
		t.Fatal(err)
	}
	if len(command) == 0 {
		t.Error(`no command after "--"`)
	}
	valid := runOptions(t)
	for name := range opts {
		if !known(t, valid, name) {
			t.Errorf("etcdlead run has no option %s", name)
		}
	}
	for _, e := range c.Env {
		if strings.HasPrefix(e.Name, "ETCDLEAD_") && !known(t, valid, e.Name) {
			t.Errorf("etcdlead run reads no variable %s", e.Name)
		}
	}
	// The probes reach the port --status-addr serves.
	_, port, _ := strings.Cut(opts["--status-addr"], ":")
	served := false
	for _, p := range c.Ports {
		if p.Name == "status" && fmt.Sprint(p.ContainerPort) == port {
			served = true
		}
	}
	if !served {
		t.Errorf("--status-addr=%s is not the container's port named status", opts["--status-addr"])
	}
	for _, p := range []*corev1.Probe{c.ReadinessProbe, c.LivenessProbe} {
		if p != nil && p.HTTPGet != nil && p.HTTPGet.Port.String() != "status" {
			t.Errorf("probe of %s on port %s, not status", p.HTTPGet.Path, p.HTTPGet.Port.String())
		}
	}
}

// optionValue is an option from the command line or, failing that, its
// variable, as etcdlead reads them.
func optionValue(opts map[string]string, env []corev1.EnvVar, name, variable string) (string, bool) {
	if v, ok := opts[name]; ok {
		return v, true
	}
	for _, e := range env {
		if e.Name == variable {
			return e.Value, true
		}
	}
	return "", false
}

func TestGraceOutlastsKillTimeout(t *testing.T) {
	d := load(t).deployment
	c := worker(t, d)
	argv, _ := invocation(t, c)
	opts, _, err := options(argv[2:])
	if err != nil {
		t.Fatal(err)
	}
	// Unset, it is the default, or less where the TTL is short.
	kill := defaultKillTimeout(t)
	if v, ok := optionValue(opts, c.Env, "--kill-timeout", "ETCDLEAD_KILL_TIMEOUT"); ok {
		if kill, err = time.ParseDuration(v); err != nil {
			t.Fatal(err)
		}
	}
	need, why := kill, "--kill-timeout"
	if v, ok := optionValue(opts, c.Env, "--notify-timeout", "ETCDLEAD_NOTIFY_TIMEOUT"); ok {
		notify, err := time.ParseDuration(v)
		if err != nil {
			t.Fatal(err)
		}
		// The stopped hook runs after the worker is gone.
		need, why = need+notify, "--kill-timeout plus --notify-timeout"
	}
	g := d.Spec.Template.Spec.TerminationGracePeriodSeconds
	if g == nil {
		t.Fatalf("no terminationGracePeriodSeconds; the default, 30 s, is not visibly longer than %s (%s)", why, need)
	}
	if grace := time.Duration(*g) * time.Second; grace <= need {
		t.Errorf("terminationGracePeriodSeconds %s is not longer than %s (%s): the kubelet's SIGKILL would come first", grace, why, need)
	}
}

// hook is the role-label script as the pod runs it: the ConfigMap key the
// --notify command names, from the volume mounted where it points.
func hook(t *testing.T, m manifests) (path, script string) {
	t.Helper()
	c := worker(t, m.deployment)
	argv, prelude := invocation(t, c)
	opts, _, err := options(argv[2:])
	if err != nil {
		t.Fatal(err)
	}
	notify := opts["--notify"]
	path, rest, _ := strings.Cut(notify, " ")
	if rest != `"$1"` {
		t.Errorf(`--notify=%s: want the script given the role, "$1"`, notify)
	}
	if !strings.HasPrefix(prelude, path+" stopped &&") {
		t.Errorf("the container does not clear the label with %s stopped before etcdlead starts: %q", path, prelude)
	}
	for _, vm := range c.VolumeMounts {
		key, ok := strings.CutPrefix(path, vm.MountPath+"/")
		if !ok {
			continue
		}
		for _, v := range m.deployment.Spec.Template.Spec.Volumes {
			if v.Name != vm.Name || v.ConfigMap == nil {
				continue
			}
			if v.ConfigMap.Name != m.configMap.Name {
				t.Fatalf("volume %s mounts ConfigMap %s, the manifests create %s", v.Name, v.ConfigMap.Name, m.configMap.Name)
			}
			// Unset, the mode is 0644, and the --notify command cannot run it.
			if mode := v.ConfigMap.DefaultMode; mode == nil || *mode&0o111 != 0o111 {
				t.Errorf("volume %s: the script is not executable by everyone (defaultMode %s)", v.Name, fmtMode(mode))
			}
			script, ok := m.configMap.Data[key]
			if !ok {
				t.Fatalf("ConfigMap %s has no key %s", m.configMap.Name, key)
			}
			return path, script
		}
	}
	t.Fatalf("--notify=%s: no ConfigMap volume is mounted there", notify)
	return "", ""
}

func fmtMode(m *int32) string {
	if m == nil {
		return "unset"
	}
	return fmt.Sprintf("%#o", *m)
}

// runHook runs the script with a curl that records its arguments and
// answers with exit code curlExit.
func runHook(t *testing.T, script string, curlExit int, env []string, args ...string) (curlArgs []string, err error) {
	t.Helper()
	dir := t.TempDir()
	sa := filepath.Join(dir, "sa")
	if err := os.Mkdir(sa, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range map[string]string{"token": "t0ken", "ca.crt": "ca"} {
		if err := os.WriteFile(filepath.Join(sa, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	record := filepath.Join(dir, "curl.args")
	curl := fmt.Sprintf("#!/bin/sh\nfor a in \"$@\"; do printf '%%s\\n' \"$a\"; done > %s\nexit %d\n", record, curlExit)
	if err := os.WriteFile(filepath.Join(dir, "curl"), []byte(curl), 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "role-label")
	if err := os.WriteFile(path, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(path, args...)
	cmd.Env = append([]string{"PATH=" + dir + ":/usr/bin:/bin", "SERVICEACCOUNT_DIR=" + sa}, env...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		err = fmt.Errorf("%v: %s", err, out)
	}
	if data, rerr := os.ReadFile(record); rerr == nil {
		curlArgs = strings.Split(strings.TrimSuffix(string(data), "\n"), "\n")
	}
	return curlArgs, err
}

func after(args []string, flag string) []string {
	var vals []string
	for i, a := range args {
		if a == flag && i+1 < len(args) {
			vals = append(vals, args[i+1])
		}
	}
	return vals
}

// The hook sets, and takes off, exactly the label the Service selects,
// with a merge patch of this pod, and fails loudly.
func TestHookLabelsTheLeader(t *testing.T) {
	if _, err := exec.LookPath("sh"); err != nil {
		t.Skip("no sh to run the hook with")
	}
	m := load(t)
	_, script := hook(t, m)
	if !strings.HasPrefix(script, "#!/bin/sh\n") {
		t.Error("the script does not start with #!/bin/sh")
	}
	want := map[string]any{}
	for k, v := range m.service.Spec.Selector {
		if _, ok := appLabels(m.deployment)[k]; !ok {
			want[k] = v
		}
	}
	pod := []string{"POD_NAME=report-generator-7d4b9-x2x", "POD_NAMESPACE=jobs"}
	for _, tc := range []struct {
		role   string
		env    []string
		labels map[string]any
	}{
		{"leader", nil, want},
		{"follower", nil, map[string]any{"role": nil}},
		{"stopped", nil, map[string]any{"role": nil}},
		{"", []string{"ETCDLEAD_ROLE=leader"}, want},
	} {
		var args []string
		if tc.role != "" {
			args = []string{tc.role}
		}
		curl, err := runHook(t, script, 0, append(slices.Clone(pod), tc.env...), args...)
		if err != nil {
			t.Errorf("%s %v: %v", tc.role, tc.env, err)
			continue
		}
		data := after(curl, "--data")
		if len(data) != 1 {
			t.Errorf("%s: curl %q: want one --data", tc.role, curl)
			continue
		}
		var patch struct {
			Metadata struct {
				Labels map[string]any `json:"labels"`
			} `json:"metadata"`
		}
		if err := json.Unmarshal([]byte(data[0]), &patch); err != nil {
			t.Errorf("%s: patch %s: %v", tc.role, data[0], err)
			continue
		}
		if fmt.Sprint(patch.Metadata.Labels) != fmt.Sprint(tc.labels) {
			t.Errorf("%s: patch sets labels %v, want %v", tc.role, patch.Metadata.Labels, tc.labels)
		}
		if !slices.Contains(curl, "--fail") {
			t.Errorf("%s: curl %q without --fail: an error answer would pass", tc.role, curl)
		}
		headers := after(curl, "--header")
		for _, h := range []string{"Content-Type: application/merge-patch+json", "Authorization: Bearer t0ken"} {
			if !slices.Contains(headers, h) {
				t.Errorf("%s: headers %q lack %q", tc.role, headers, h)
			}
		}
		if got := after(curl, "--request"); !slices.Equal(got, []string{"PATCH"}) {
			t.Errorf("%s: curl --request %q, want PATCH", tc.role, got)
		}
		url := "https://kubernetes.default.svc/api/v1/namespaces/jobs/pods/report-generator-7d4b9-x2x"
		if curl[len(curl)-1] != url {
			t.Errorf("%s: curl %q, want the URL %s last", tc.role, curl, url)
		}
	}
	for name, tc := range map[string]struct {
		curlExit int
		env      []string
		args     []string
	}{
		"unknown role":        {0, pod, []string{"candidate"}},
		"no role":             {0, pod, nil},
		"no pod name":         {0, pod[1:], []string{"leader"}},
		"the API says no":     {22, pod, []string{"leader"}},
		"the API says no too": {22, pod, []string{"stopped"}},
	} {
		if _, err := runHook(t, script, tc.curlExit, tc.env, tc.args...); err == nil {
			t.Errorf("%s: the hook exited 0", name)
		}
	}
}

// The excerpts docs/containers.md shows of these files are theirs: every
// line of its YAML blocks is a line of a manifest, and each patch of its
// shell block is the hook's.
func TestDocsQuoteTheManifests(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "containers.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, ok := strings.Cut(string(data), "\n## In Kubernetes\n")
	if !ok {
		t.Fatal(`docs/containers.md has no "## In Kubernetes"`)
	}
	comment := regexp.MustCompile(`\s+#\s.*$`)
	norm := func(l string) string { return strings.TrimSpace(comment.ReplaceAllString(l, "")) }
	var lines []string
	files, _ := filepath.Glob("*.yaml")
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			lines = append(lines, norm(l))
		}
	}
	_, script := hook(t, load(t))
	quoted := 0
	lang := ""
	for _, l := range strings.Split(section, "\n") {
		switch {
		case strings.HasPrefix(l, "```"):
			lang = strings.TrimPrefix(l, "```")
			continue
		case lang == "yaml" && norm(l) != "" && norm(l) != "...":
			if !slices.Contains(lines, norm(l)) {
				t.Errorf("docs/containers.md shows %q, which no manifest has", norm(l))
			}
			quoted++
		case lang == "sh" && strings.HasPrefix(norm(l), "patch="):
			p, _, _ := strings.Cut(norm(l), " ;;")
			if !strings.Contains(script, p) {
				t.Errorf("docs/containers.md shows %q, which the hook does not", p)
			}
			quoted++
		}
	}
	if quoted == 0 {
		t.Error("docs/containers.md quotes no manifest")
	}
}
