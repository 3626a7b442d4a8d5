package main

import (
	"maps"
	"testing"
)

// TestSamEnv: the -env-file is what sam local can apply: the emulator's
// endpoint under the variable the template declares (AWS_ENDPOINT_URL
// would be ignored), no region or credentials (sam sets those from its
// own session), everything else as the function has it.
func TestSamEnv(t *testing.T) {
	got := samEnv(map[string]string{
		"AWS_ENDPOINT_URL": "http://127.0.0.1:5000", "GHCLAIM_ENDPOINT_URL": "",
		"AWS_REGION": "us-east-1", "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
		"TABLE_NAME": "jobs",
	})
	want := map[string]string{"GHCLAIM_ENDPOINT_URL": "http://127.0.0.1:5000", "TABLE_NAME": "jobs"}
	if !maps.Equal(got, want) {
		t.Errorf("got %v, want %v", got, want)
	}
}
