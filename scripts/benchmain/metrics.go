package main

import (
	"bufio"
	"context"
	"fmt"
	"math"
	"net/http"
	"sort"
	"strconv"
	"strings"
)

// series is one sample of etcd's Prometheus text output.
type series struct {
	name   string
	labels map[string]string
	value  float64
}

// metrics is one scrape of etcd's /metrics.
type metrics []series

func scrape(ctx context.Context, url string) (metrics, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return nil, err
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET %s: %s", url, resp.Status)
	}
	var m metrics
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		s, ok := parseSeries(line)
		if ok {
			m = append(m, s)
		}
	}
	return m, sc.Err()
}

func parseSeries(line string) (series, bool) {
	sp := strings.LastIndexByte(line, ' ')
	if sp < 0 {
		return series{}, false
	}
	v, err := strconv.ParseFloat(line[sp+1:], 64)
	if err != nil {
		return series{}, false
	}
	head := line[:sp]
	s := series{value: v, labels: map[string]string{}}
	open := strings.IndexByte(head, '{')
	if open < 0 {
		s.name = head
		return s, true
	}
	s.name = head[:open]
	body := strings.TrimSuffix(head[open+1:], "}")
	for body != "" {
		eq := strings.IndexByte(body, '=')
		if eq < 0 || eq+1 >= len(body) || body[eq+1] != '"' {
			return series{}, false
		}
		k := body[:eq]
		rest := body[eq+2:]
		end := strings.IndexByte(rest, '"')
		if end < 0 {
			return series{}, false
		}
		s.labels[k] = rest[:end]
		body = strings.TrimPrefix(rest[end+1:], ",")
	}
	return s, true
}

// sum adds the values of every series called name whose labels include
// every pair in match (given as "k", "v", "k", "v", ...).
func (m metrics) sum(name string, match ...string) float64 {
	var total float64
next:
	for _, s := range m {
		if s.name != name {
			continue
		}
		for i := 0; i+1 < len(match); i += 2 {
			if s.labels[match[i]] != match[i+1] {
				continue next
			}
		}
		total += s.value
	}
	return total
}

// byLabel maps each value of label among the series called name to its sum.
func (m metrics) byLabel(name, label string) map[string]float64 {
	out := map[string]float64{}
	for _, s := range m {
		if s.name == name {
			out[s.labels[label]] += s.value
		}
	}
	return out
}

// delta is what etcd counted between two scrapes.
type delta struct{ before, after metrics }

func (d delta) sum(name string, match ...string) float64 {
	return d.after.sum(name, match...) - d.before.sum(name, match...)
}

func (d delta) byLabel(name, label string) map[string]float64 {
	out := d.after.byLabel(name, label)
	for k, v := range d.before.byLabel(name, label) {
		out[k] -= v
	}
	for k, v := range out {
		if v == 0 {
			delete(out, k)
		}
	}
	return out
}

// histogram is the cumulative buckets of one Prometheus histogram, as a
// difference between two scrapes.
type histogram struct {
	bounds []float64 // upper bounds, ascending, +Inf last
	counts []float64 // cumulative
	sum    float64
	count  float64
}

func (d delta) histogram(name string) histogram {
	var h histogram
	cum := map[float64]float64{}
	for _, pair := range []struct {
		m    metrics
		sign float64
	}{{d.after, 1}, {d.before, -1}} {
		for _, s := range pair.m {
			switch s.name {
			case name + "_bucket":
				le, err := strconv.ParseFloat(s.labels["le"], 64)
				if err == nil {
					cum[le] += pair.sign * s.value
				}
			case name + "_sum":
				h.sum += pair.sign * s.value
			case name + "_count":
				h.count += pair.sign * s.value
			}
		}
	}
	for le := range cum {
		h.bounds = append(h.bounds, le)
	}
	sort.Float64s(h.bounds)
	for _, le := range h.bounds {
		h.counts = append(h.counts, cum[le])
	}
	return h
}

// mean is _sum/_count: exact, unlike anything read from the buckets.
func (h histogram) mean() float64 {
	if h.count == 0 {
		return math.NaN()
	}
	return h.sum / h.count
}

// quantile interpolates linearly inside the bucket that holds quantile q, as
// Prometheus' histogram_quantile does. With etcd's power-of-two buckets the
// answer is only good to within its bucket.
func (h histogram) quantile(q float64) float64 {
	if h.count == 0 || len(h.bounds) == 0 {
		return math.NaN()
	}
	rank := q * h.count
	prevBound, prevCount := 0.0, 0.0
	for i, b := range h.bounds {
		if h.counts[i] >= rank {
			if math.IsInf(b, 1) {
				return prevBound
			}
			inBucket := h.counts[i] - prevCount
			if inBucket == 0 {
				return b
			}
			return prevBound + (b-prevBound)*(rank-prevCount)/inBucket
		}
		prevBound, prevCount = b, h.counts[i]
	}
	return prevBound
}
