package job

import (
	"testing"
	"time"
)

// TestRunnerNames: every attempt's name reads back as its pool, job and
// replacement, whatever digits the pool names end in; names we did not
// make are not ours.
func TestRunnerNames(t *testing.T) {
	t.Parallel()
	pools := []string{"linux", "linux-2", "gpu8", "linux-2-r1"}
	tests := []struct {
		name   string
		runner string
		want   Runner
		wantOK bool
		madeBy func() string // RunnerNameAt, when the name is one of ours
	}{
		{name: "first attempt", runner: "linux-7", want: Runner{"linux", 7, 0}, wantOK: true, madeBy: func() string { return RunnerNameAt("linux", 7, 0) }},
		{name: "replacement", runner: "linux-7-r2", want: Runner{"linux", 7, 2}, wantOK: true, madeBy: func() string { return RunnerNameAt("linux", 7, 2) }},
		{name: "pool ending in -digits", runner: "linux-2-9", want: Runner{"linux-2", 9, 0}, wantOK: true, madeBy: func() string { return RunnerName("linux-2", 9) }},
		{name: "pool ending in -digits, replacement", runner: "linux-2-9-r1", want: Runner{"linux-2", 9, 1}, wantOK: true, madeBy: func() string { return RunnerNameAt("linux-2", 9, 1) }},
		{name: "job 2 of pool linux, replacement 1", runner: "linux-2-r1", want: Runner{"linux", 2, 1}, wantOK: true, madeBy: func() string { return RunnerNameAt("linux", 2, 1) }},
		{name: "pool named like a replacement", runner: "linux-2-r1-5", want: Runner{"linux-2-r1", 5, 0}, wantOK: true, madeBy: func() string { return RunnerName("linux-2-r1", 5) }},
		{name: "pool ending in a digit", runner: "gpu8-31", want: Runner{"gpu8", 31, 0}, wantOK: true, madeBy: func() string { return RunnerName("gpu8", 31) }},
		{name: "unknown pool", runner: "windows-7"},
		{name: "prefix without dash", runner: "linux7"},
		{name: "no job id", runner: "linux-"},
		{name: "job id zero", runner: "linux-0"},
		{name: "leading zero", runner: "linux-07"},
		{name: "replacement zero", runner: "linux-7-r0"},
		{name: "replacement without digits", runner: "linux-7-r"},
		{name: "other suffix", runner: "linux-7-x1"},
		{name: "extra part", runner: "linux-7-r1-2"},
		{name: "signed", runner: "linux-+7"},
		{name: "hosted runner", runner: "GitHub Actions 12"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := ParseRunnerName(tt.runner, pools...)
			if ok != tt.wantOK || got != tt.want {
				t.Fatalf("ParseRunnerName(%q) = %+v, %v; want %+v, %v", tt.runner, got, ok, tt.want, tt.wantOK)
			}
			if tt.madeBy != nil && tt.madeBy() != tt.runner {
				t.Fatalf("RunnerNameAt made %q, want %q", tt.madeBy(), tt.runner)
			}
		})
	}
}

func TestReplaceable(t *testing.T) {
	t.Parallel()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	tests := []struct {
		name string
		rec  Record
		want bool
	}{
		{name: "first replacement", rec: Record{}, want: true},
		{name: "below the cap", rec: Record{Replacements: 2, FirstFailureAt: Millis(now.Add(-time.Hour))}, want: true},
		{name: "at the cap", rec: Record{Replacements: 3}},
		{name: "past max age", rec: Record{FirstFailureAt: Millis(now.Add(-91 * time.Minute))}},
	}
	for _, tt := range tests {
		if got := Replaceable(tt.rec, now, 3, 90*time.Minute); got != tt.want {
			t.Errorf("%s: got %v, want %v", tt.name, got, tt.want)
		}
	}
}
