package etcdwire

import (
	"context"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hashicorp/go-hclog"
	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// Stream is a term's own watch stream: the guard's watches and the wait's
// all run on it, so that one progress request asks after all of them. A
// member that is frozen, or behind a link that carries nothing, keeps the
// stream open and sends nothing; no error ever comes, and etcd's own
// progress notifications are minutes apart. So the stream asks: at the
// cadence its owner gives (Cadence), a progress request, which etcd
// answers on the stream once the stream's watches have delivered
// everything up to the revision it names. While only the guard watches,
// it asks only when there may be something to miss: when the renewals'
// answers name a revision past the last one the stream confirmed
// (needless); an idle election, where nothing is written, then costs etcd
// no request for it at all. A stream that answers nothing within the
// stall bound is stalled: it is replaced by a new one, opened on another
// member where the client has one, and every watch on it is opened again
// on the new stream from where it stood (WatchOn). etcd replays what the
// stalled stream did not deliver from its history, so nothing is lost and
// nothing needs reading; a revision compacted away in between fails the
// watch, which its owner answers with a read, as any broken watch.
//
// It is a clientv3.Watcher so that a lease revoke's owner closes it as it
// would any.
type Stream struct {
	cli  *clientv3.Client
	log  hclog.Logger
	key  string // the probe's key: the term's queue key
	pace Cadence
	poke chan struct{} // a wait started: the cadence may have changed
	done chan struct{} // closed by Close

	mu     sync.Mutex
	cur    *streamGen
	avoid  []string // members of streams found stalled since one last answered
	closed bool

	waits atomic.Int32 // waits watching on the stream now
	// known is the highest revision etcd is known to have reached, from
	// the renewals' answers on the same client (Renewals.Revision).
	known func() int64
	asked atomic.Int64 // progress requests asked (ask), for tests
}

// streamGen is one watcher of a Stream, which lives until it is
// found stalled; gone is closed then, before the watcher is.
type streamGen struct {
	w      clientv3.Watcher
	client *pickingClient
	gone   chan struct{}
	// ctx ends with gone: watches opened on g end with it, so that none
	// waits on a stalled member for its watcher's close.
	ctx    context.Context
	cancel context.CancelFunc
}

// Cadence is how often a Stream asks, and how long it waits for an answer;
// its owner decides both (campaign/timing.go).
type Cadence struct {
	Wait  time.Duration // between questions while a wait watches
	Guard time.Duration // between questions while only the guard watches
	Stall time.Duration // the first bound on an answer (nextBound)
	Max   time.Duration // the bound never exceeds it
}

// NewStream opens a watch stream on cli whose probe watches key; Monitor
// then asks after it.
func NewStream(cli *clientv3.Client, log hclog.Logger, key string, pace Cadence) *Stream {
	s := &Stream{cli: cli, log: log, key: key, pace: pace, poke: make(chan struct{}, 1), done: make(chan struct{}),
		known: RenewalsOf(cli).Revision}
	s.cur = s.open(nil)
	return s
}

// open makes a watcher whose gRPC streams avoid the given members.
func (s *Stream) open(avoid []string) *streamGen {
	pc := &pickingClient{WatchClient: pb.NewWatchClient(s.cli.ActiveConnection()), picks: 2 * len(s.cli.Endpoints()), avoid: avoid}
	ctx, cancel := context.WithCancel(context.Background())
	return &streamGen{w: clientv3.NewWatchFromWatchClient(pc, s.cli), client: pc, gone: make(chan struct{}), ctx: ctx, cancel: cancel}
}

func (s *Stream) current() *streamGen {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cur
}

// Watch watches on the current stream; WatchOn follows replacements.
func (s *Stream) Watch(ctx context.Context, key string, opts ...clientv3.OpOption) clientv3.WatchChan {
	return s.current().w.Watch(ctx, key, opts...)
}

// RequestProgress asks the current stream for a progress notification.
func (s *Stream) RequestProgress(ctx context.Context) error {
	return s.current().w.RequestProgress(ctx)
}

// Close closes the current stream, and with it every watch on it; no
// stream is opened after it.
func (s *Stream) Close() error {
	s.mu.Lock()
	if !s.closed {
		close(s.done)
	}
	s.closed = true
	g := s.cur
	s.mu.Unlock()
	// Its watches end with it, each without a cancel request
	// (pickingClient.end).
	g.client.end()
	return g.w.Close()
}

// replace puts a new stream in g's place, unless g was replaced already
// or the stream is closed, and closes g.
func (s *Stream) replace(g *streamGen, after time.Duration) {
	s.mu.Lock()
	if s.closed || s.cur != g {
		s.mu.Unlock()
		return
	}
	if m := g.client.member(); m != "" && !slices.Contains(s.avoid, m) {
		s.avoid = append(s.avoid, m)
	}
	s.cur = s.open(slices.Clone(s.avoid))
	avoid := slices.Clone(s.avoid)
	s.mu.Unlock()
	s.log.Warn("watch stream answered nothing; watching on another member", "after", after, "avoid", avoid)
	close(g.gone)
	g.cancel()
	// Closing ends every watch on g, and its probe; it is not waited for,
	// so that nothing on a stalled member holds up the monitor.
	g.client.end()
	go g.w.Close()
}

// answered records that the current stream answered: every member is
// worth a try again.
func (s *Stream) answered() {
	s.mu.Lock()
	s.avoid = nil
	s.mu.Unlock()
}

// Waiting records a wait's watches on the stream until the returned func
// is called: while one lasts, the stream is asked after at Cadence.Wait.
func (s *Stream) Waiting() func() {
	s.waits.Add(1)
	select {
	case s.poke <- struct{}{}:
	default:
	}
	return func() { s.waits.Add(-1) }
}

// progressEvery is how often the stream is asked for progress.
func (s *Stream) progressEvery() time.Duration {
	if s.waits.Load() > 0 {
		return s.pace.Wait
	}
	return s.pace.Guard
}

// nextBound is the bound after a stream answered (took, its answer's
// time) or not (took < 0): doubled for each stream in a row that answers
// nothing, and twice the time the last answer took, so that a slow link,
// whose answers come late but come, settles on a stream instead of
// replacing one after another. It starts at Cadence.Stall and never
// exceeds Cadence.Max.
func (c Cadence) nextBound(bound, took time.Duration) time.Duration {
	if took < 0 {
		return min(2*bound, c.Max)
	}
	return min(max(c.Stall, 2*took), c.Max)
}

// Monitor asks after the stream until ctx ends, and replaces it when it
// stalls. It keeps a probe watch of its own on the stream, on the term's
// queue key: the answers to progress requests reach every watch on the
// stream, so the probe hears them whatever else watches, and its creation
// on a new stream is that stream's first answer.
func (s *Stream) Monitor(ctx context.Context) {
	bound := s.pace.Stall
	var (
		g         *streamGen
		probe     clientv3.WatchChan
		last      time.Time // when the stream was last asked
		confirmed int64     // the revision its last progress answer named
		// synced is g's count of watches created from history when it
		// was sent the request its last progress answer answered: etcd
		// answers only once every watch on the stream has caught up.
		synced int64
	)
	for ctx.Err() == nil {
		if cur := s.current(); cur != g || probe == nil {
			// A new stream, or the probe's watch ended (the stream
			// broke, and the watcher opens another): open the probe,
			// whose creation must be answered within the bound.
			g = cur
			probe = s.probe(g)
			confirmed, synced = 0, 0
		} else {
			due, ended := s.pause(ctx, g, probe, last)
			if ended {
				probe = nil
				sleep(ctx, bound)
			}
			if !due {
				continue
			}
			last = time.Now()
			if s.needless(confirmed) {
				continue
			}
			drain(probe)
			rev, ended := s.ask(ctx, g, probe, bound, &synced)
			confirmed = max(confirmed, rev)
			bound = s.judge(ctx, g, rev > 0, ended, bound, time.Since(last))
			if ended {
				probe = nil
				sleep(ctx, bound)
			}
			continue
		}
		last = time.Now()
		rev, _, ended := heard(ctx, probe, bound)
		bound = s.judge(ctx, g, rev > 0, ended, bound, time.Since(last))
		if ended {
			// Not in a tight loop on a member that refuses streams (one
			// without a raft leader refuses them at once).
			probe = nil
			sleep(ctx, bound)
		}
	}
}

// probe watches the term's key on g, with the creation answered, and
// hands on what it hears until g ends. A watch's creation returns only
// once its member answers it, so it is made here, not in the monitor,
// which must judge a silent member meanwhile.
func (s *Stream) probe(g *streamGen) clientv3.WatchChan {
	out := make(chan clientv3.WatchResponse)
	go func() {
		defer close(out)
		for resp := range g.w.Watch(clientv3.WithRequireLeader(g.ctx), s.key, clientv3.WithCreatedNotify()) {
			select {
			case out <- resp:
			case <-g.ctx.Done():
				return
			case <-s.done:
				return
			}
		}
	}()
	return out
}

// needless says that asking the stream now would tell nothing: only the
// guard watches on it, and no renewal answer has named a revision past
// confirmed, the last its progress answers named, so no write can have
// been made that the stream did not deliver. A write (a key deleted, a
// resign request) moves the revision, which the next renewal answer, at
// most r later, names; the stream is asked at the next pause's end.
func (s *Stream) needless(confirmed int64) bool {
	k := s.known()
	return s.waits.Load() == 0 && k > 0 && k <= confirmed
}

// judge acts on what a stream said within bound, after took: nothing at
// all, and it is replaced. It returns the bound for the next question.
func (s *Stream) judge(ctx context.Context, g *streamGen, answered, ended bool, bound, took time.Duration) time.Duration {
	switch {
	case answered:
		s.answered()
		return s.pace.nextBound(bound, took)
	case !ended && ctx.Err() == nil:
		s.replace(g, bound)
		return s.pace.nextBound(bound, -1)
	}
	return bound
}

// ask sends a progress request on g and waits until the probe hears an
// answer or bound has passed. etcd drops, without an answer, a request
// that finds a watch on the stream still catching up with its history (a
// watch just opened from a past revision); asked again a moment later, it
// answers. So while a watch created from history since the stream last
// answered (synced) may still be catching up, ask asks again every
// quarter of the bound. Otherwise once: a stream that is merely slow, or a
// process starved of CPU, would be asked four times for one answer, and a
// whole fleet at once where etcd itself is slow.
func (s *Stream) ask(ctx context.Context, g *streamGen, probe clientv3.WatchChan, bound time.Duration, synced *int64) (rev int64, ended bool) {
	s.asked.Add(1)
	end := time.Now().Add(bound)
	// An answer may be to the first request: it vouches for the watches
	// created before that one was sent.
	n := g.client.fromHistory.Load()
	for {
		rctx, cancel := context.WithTimeout(clientv3.WithRequireLeader(g.ctx), bound/4)
		_ = g.w.RequestProgress(rctx)
		cancel()
		wait := time.Until(end)
		if g.client.fromHistory.Load() > *synced {
			wait = min(bound/4, wait)
		}
		var progress bool
		rev, progress, ended = heard(ctx, probe, wait)
		if progress {
			*synced = n
		}
		if rev > 0 || ended || ctx.Err() != nil || !time.Now().Before(end) {
			return rev, ended
		}
	}
}

// pause waits until the stream is due to be asked (due), or until the
// probe's watch ended, the stream was replaced or ctx ended. A wait that
// starts meanwhile shortens the pause to its cadence; what the probe hears
// is read as it comes.
func (s *Stream) pause(ctx context.Context, g *streamGen, probe clientv3.WatchChan, last time.Time) (due, ended bool) {
	for {
		t := time.NewTimer(time.Until(last.Add(s.progressEvery())))
		select {
		case <-t.C:
			return true, false
		case <-s.poke:
		case _, ok := <-probe:
			if !ok {
				t.Stop()
				return false, true
			}
		case <-g.gone:
		case <-ctx.Done():
		}
		t.Stop()
		if ctx.Err() != nil || s.current() != g {
			return false, false
		}
	}
}

// heard waits up to bound for anything on the probe: an answer or an
// event, with the revision its header names (rev, > 0), or the end of its
// watch (ended: a stream that ends is not silent, but says nothing of its
// member; the probe is opened again). Only a progress answer (progress)
// vouches for every watch on the stream; an event's revision is returned
// as 1, an answer that confirms nothing past what was confirmed. What came
// in as the bound ran out counts: a process that was starved of CPU finds
// both ready at once, and its stream did answer.
func heard(ctx context.Context, probe clientv3.WatchChan, bound time.Duration) (rev int64, progress, ended bool) {
	t := time.NewTimer(bound)
	defer t.Stop()
	late := false
	for {
		var (
			resp clientv3.WatchResponse
			ok   bool
		)
		if late {
			select {
			case resp, ok = <-probe:
			default:
				return 0, false, false
			}
		} else {
			select {
			case resp, ok = <-probe:
			case <-t.C:
				late = true
				continue
			case <-ctx.Done():
				return 0, false, false
			}
		}
		switch {
		case !ok:
			return 0, false, true
		case resp.IsProgressNotify():
			return max(resp.Header.Revision, 1), true, false
		case !resp.Canceled:
			return 1, false, false
		}
		// Its watch is cancelled: the channel closes next.
	}
}

// drain reads what the probe holds already, so that only what comes after
// a request counts as its answer.
func drain(probe clientv3.WatchChan) {
	for {
		select {
		case _, ok := <-probe:
			if !ok {
				return
			}
		default:
			return
		}
	}
}

// Asked is how many times the stream has been asked for progress (each
// ask may send a request more than once).
func (s *Stream) Asked() int64 { return s.asked.Load() }

// sleep waits for d, or until ctx ends.
func sleep(ctx context.Context, d time.Duration) {
	wait := time.NewTimer(d)
	defer wait.Stop()
	select {
	case <-wait.C:
	case <-ctx.Done():
	}
}
