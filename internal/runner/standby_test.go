package runner

import (
	"testing"
	"time"

	"github.com/hashicorp/go-hclog"

	"github.com/etcdlead/etcdlead/supervisor"
)

// Prepare returns while the keeper starts, so the campaign's first request
// goes out beside the fork; a second Prepare meanwhile starts no other
// keeper, and take waits for the one under way.
func TestStandbyStartsBesideItsCaller(t *testing.T) {
	s := NewStandby(supervisor.Spec{}, hclog.NewNullLogger())
	launches := make(chan struct{}, 2)
	release := make(chan struct{}, 1)
	want := &supervisor.Pending{}
	s.launch = func(supervisor.Spec, hclog.Logger) (*supervisor.Pending, error) {
		launches <- struct{}{}
		<-release
		return want, nil
	}
	defer close(release)
	returned := make(chan struct{})
	go func() {
		s.Prepare()
		close(returned)
	}()
	<-launches
	select {
	case <-returned:
	case <-time.After(10 * time.Second):
		t.Fatal("Prepare waited for the keeper's start")
	}
	s.Prepare()
	took := make(chan *supervisor.Pending)
	go func() { took <- s.take() }()
	select {
	case <-took:
		t.Fatal("take returned before the keeper under way was up")
	case <-launches:
		t.Fatal("a second Prepare started a second keeper")
	case <-time.After(50 * time.Millisecond):
	}
	release <- struct{}{}
	if got := <-took; got != want {
		t.Fatalf("take = %p, want the keeper started (%p)", got, want)
	}
	if got := s.take(); got != nil {
		t.Fatalf("a second take = %p, want none", got)
	}
}
