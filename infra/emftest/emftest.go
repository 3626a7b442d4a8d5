// Package emftest parses CloudWatch Embedded Metric Format lines out of a
// function's output, checking each against the format's rules the way
// CloudWatch Logs does (a line that breaks one publishes nothing), so a
// test asserts the metrics CloudWatch would actually receive.
//
// It is a test kit: nothing in a production binary imports it.
package emftest

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"maps"
	"slices"
	"strings"
	"testing"
)

// Point is one metric of one EMF line.
type Point struct {
	Namespace string
	Name      string
	Unit      string
	// Values holds the line's value, or its samples when it is an array.
	Values []float64
	// Sets are the dimension sets it is published under, each sorted.
	Sets [][]string
	// Dims holds the value of every dimension named in Sets.
	Dims map[string]string
}

// Sum is the sum of p's values.
func (p Point) Sum() float64 {
	s := 0.0
	for _, v := range p.Values {
		s += v
	}
	return s
}

// Parse returns the metrics of every EMF line (a JSON object with an _aws
// member) of out, failing t on a line that breaks the format: no
// Timestamp, a dimension without a string value at the root, a metric
// without a numeric value, more than 30 dimensions in a set or 100
// metrics in a directive.
func Parse(t testing.TB, out []byte) []Point {
	t.Helper()
	var points []Point
	sc := bufio.NewScanner(bytes.NewReader(out))
	sc.Buffer(make([]byte, 0, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Bytes()
		var root map[string]json.RawMessage
		if json.Unmarshal(line, &root) != nil || root["_aws"] == nil {
			continue
		}
		ps, err := parseLine(root)
		if err != nil {
			t.Fatalf("bad EMF line %s: %v", line, err)
		}
		points = append(points, ps...)
	}
	return points
}

func parseLine(root map[string]json.RawMessage) ([]Point, error) {
	var aws struct {
		Timestamp         *int64 `json:"Timestamp"`
		CloudWatchMetrics []struct {
			Namespace  string     `json:"Namespace"`
			Dimensions [][]string `json:"Dimensions"`
			Metrics    []struct {
				Name string `json:"Name"`
				Unit string `json:"Unit"`
			} `json:"Metrics"`
		} `json:"CloudWatchMetrics"`
	}
	if err := json.Unmarshal(root["_aws"], &aws); err != nil {
		return nil, err
	}
	if err := exactMembers(root["_aws"]); err != nil {
		return nil, err
	}
	if aws.Timestamp == nil {
		return nil, fmt.Errorf("no _aws.Timestamp")
	}
	if len(aws.CloudWatchMetrics) == 0 {
		return nil, fmt.Errorf("no CloudWatchMetrics directive")
	}
	var out []Point
	for _, d := range aws.CloudWatchMetrics {
		if d.Namespace == "" || strings.HasPrefix(d.Namespace, "AWS/") {
			return nil, fmt.Errorf("namespace %q", d.Namespace)
		}
		if len(d.Metrics) == 0 || len(d.Metrics) > 100 {
			return nil, fmt.Errorf("%d metrics in a directive", len(d.Metrics))
		}
		dims := map[string]string{}
		var sets [][]string
		for _, set := range d.Dimensions {
			if len(set) > 30 {
				return nil, fmt.Errorf("%d dimensions in a set", len(set))
			}
			for _, n := range set {
				var v string
				if err := json.Unmarshal(root[n], &v); err != nil || v == "" {
					return nil, fmt.Errorf("dimension %q has no string value at the root (%s)", n, root[n])
				}
				dims[n] = v
			}
			sets = append(sets, slices.Sorted(slices.Values(set)))
		}
		for _, m := range d.Metrics {
			var vals []float64
			var one float64
			if err := json.Unmarshal(root[m.Name], &one); err == nil {
				vals = []float64{one}
			} else if err := json.Unmarshal(root[m.Name], &vals); err != nil || len(vals) == 0 {
				return nil, fmt.Errorf("metric %q has no numeric value at the root (%s)", m.Name, root[m.Name])
			}
			out = append(out, Point{Namespace: d.Namespace, Name: m.Name, Unit: m.Unit, Values: vals, Sets: sets, Dims: maps.Clone(dims)})
		}
	}
	return out, nil
}

// exactMembers checks the spelling of the directive's members, which
// encoding/json matches without regard to case and CloudWatch does not:
// "_aws" needs Timestamp and CloudWatchMetrics, each directive Namespace,
// Dimensions (an array of arrays of names) and Metrics, each metric Name,
// spelled so.
func exactMembers(raw json.RawMessage) error {
	var aws struct {
		CloudWatchMetrics []json.RawMessage
	}
	if err := need(raw, "Timestamp", "CloudWatchMetrics"); err != nil {
		return err
	}
	if err := json.Unmarshal(raw, &aws); err != nil {
		return err
	}
	for _, d := range aws.CloudWatchMetrics {
		if err := need(d, "Namespace", "Dimensions", "Metrics"); err != nil {
			return err
		}
		var dir struct {
			Dimensions json.RawMessage
			Metrics    []json.RawMessage
		}
		if err := json.Unmarshal(d, &dir); err != nil {
			return err
		}
		// An array of arrays: null, or a null set, is no dimension set.
		var sets []json.RawMessage
		if err := json.Unmarshal(dir.Dimensions, &sets); err != nil || sets == nil {
			return fmt.Errorf("Dimensions %s is not an array of dimension sets", dir.Dimensions)
		}
		for _, set := range sets {
			var names []string
			if err := json.Unmarshal(set, &names); err != nil || names == nil {
				return fmt.Errorf("dimension set %s is not an array of names", set)
			}
		}
		for _, m := range dir.Metrics {
			if err := need(m, "Name"); err != nil {
				return err
			}
		}
	}
	return nil
}

// need fails unless the JSON object raw has a member of each name, spelled
// exactly so.
func need(raw json.RawMessage, names ...string) error {
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil {
		return err
	}
	for _, n := range names {
		if _, ok := obj[n]; !ok {
			return fmt.Errorf("no member %q (spelled so) in %s", n, raw)
		}
	}
	return nil
}

// Select returns the points of metric name whose dimension values include
// every one of dims.
func Select(points []Point, name string, dims map[string]string) []Point {
	var out []Point
	for _, p := range points {
		if p.Name != name {
			continue
		}
		ok := true
		for k, v := range dims {
			if p.Dims[k] != v {
				ok = false
			}
		}
		if ok {
			out = append(out, p)
		}
	}
	return out
}

// Total sums the values of the points of metric name with dims.
func Total(points []Point, name string, dims map[string]string) float64 {
	s := 0.0
	for _, p := range Select(points, name, dims) {
		s += p.Sum()
	}
	return s
}

// Names lists the distinct metric names of points, sorted.
func Names(points []Point) []string {
	var out []string
	for _, p := range points {
		out = append(out, p.Name)
	}
	slices.Sort(out)
	return slices.Compact(out)
}
