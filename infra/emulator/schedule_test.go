package emulator

import (
	"fmt"
	"testing"
)

// TestScheduledFunctionsAreNotRetriedByLambda: a schedule invokes its
// function asynchronously, and Lambda retries a failed asynchronous run
// twice by default, beside the schedule's next run: the janitor would spend
// its GitHub budget up to three times a period, and a retry would overlap
// the next pass. The schedule is the retry. MaximumRetryAttempts covers
// only the function's own errors: a throttled event (429, no concurrency
// left: the claimer took it) or a Lambda system error goes back to the
// asynchronous queue and is tried for up to 6 hours by default, so late
// passes ran beside the newer ones; MaximumEventAgeInSeconds 60 (Lambda's
// least) drops a tick the next one replaces.
func TestScheduledFunctionsAreNotRetriedByLambda(t *testing.T) {
	t.Parallel()
	tmpl := projectTemplate(t)
	scheduled := 0
	for _, id := range resourcesOfType(tmpl, "AWS::Serverless::Function") {
		props, _ := dig(tmpl, "Resources", id, "Properties").(map[string]any)
		events, _ := props["Events"].(map[string]any)
		onSchedule := false
		for _, e := range events {
			if em, _ := e.(map[string]any); em["Type"] == "Schedule" || em["Type"] == "ScheduleV2" {
				onSchedule = true
			}
		}
		if !onSchedule {
			continue
		}
		scheduled++
		if got := fmt.Sprint(dig(props, "EventInvokeConfig", "MaximumRetryAttempts")); got != "0" {
			t.Errorf("%s runs on a schedule with EventInvokeConfig.MaximumRetryAttempts %s, want 0", id, got)
		}
		if got := fmt.Sprint(dig(props, "EventInvokeConfig", "MaximumEventAgeInSeconds")); got != "60" {
			t.Errorf("%s runs on a schedule with EventInvokeConfig.MaximumEventAgeInSeconds %s, want 60: a throttled tick is retried for up to 6 h", id, got)
		}
	}
	if scheduled == 0 {
		t.Fatal("no scheduled function found: nothing was checked")
	}
}
