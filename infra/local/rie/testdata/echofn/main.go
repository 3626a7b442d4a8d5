// Command echofn is a tiny Lambda function for rie's tests. What it does is chosen by the
// event, so one binary covers every path of the Runtime API: echo, error, slow, crash, meet
// another environment at a barrier, report its deadline / environment / how many invocations
// this process has served.
package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

type event struct {
	Echo    json.RawMessage `json:"echo,omitempty"`
	Fail    string          `json:"fail,omitempty"`
	SleepMS int             `json:"sleep_ms,omitempty"`
	Exit    *int            `json:"exit,omitempty"`
	Env     string          `json:"env,omitempty"`
	Big     int             `json:"big,omitempty"`
	// Barrier is a directory: the handler leaves a file there and waits until Parties have.
	Barrier string `json:"barrier,omitempty"`
	Parties int    `json:"parties,omitempty"`
}

type answer struct {
	Echo       json.RawMessage `json:"echo,omitempty"`
	DeadlineMS int64           `json:"deadline_ms"`
	ARN        string          `json:"arn"`
	RequestID  string          `json:"request_id"`
	Count      int             `json:"count"`
	Env        *string         `json:"env,omitempty"`
	Big        string          `json:"big,omitempty"`
	PID        int             `json:"pid"`
}

var count int

func handle(ctx context.Context, e event) (answer, error) {
	count++
	fmt.Printf("echofn invocation %d pid %d\n", count, os.Getpid())
	if e.Barrier != "" {
		if err := meet(ctx, e.Barrier, e.Parties); err != nil {
			return answer{}, err
		}
	}
	if e.SleepMS > 0 {
		// A hung handler: it ignores its deadline, so only the host can end it.
		time.Sleep(time.Duration(e.SleepMS) * time.Millisecond)
	}
	if e.Exit != nil {
		fmt.Println("echofn exiting on request")
		os.Exit(*e.Exit)
	}
	if e.Fail != "" {
		return answer{}, errors.New(e.Fail)
	}
	a := answer{Echo: e.Echo, Count: count, PID: os.Getpid()}
	if dl, ok := ctx.Deadline(); ok {
		a.DeadlineMS = dl.UnixMilli()
	}
	if lc, ok := lambdacontext.FromContext(ctx); ok {
		a.ARN, a.RequestID = lc.InvokedFunctionArn, lc.AwsRequestID
	}
	if e.Env != "" {
		v, ok := os.LookupEnv(e.Env)
		if ok {
			a.Env = &v
		}
	}
	if e.Big > 0 {
		a.Big = strings.Repeat("x", e.Big)
	}
	return a, nil
}

// meet leaves this process's mark in dir and waits, until ctx's deadline, for parties marks.
func meet(ctx context.Context, dir string, parties int) error {
	if err := os.WriteFile(filepath.Join(dir, strconv.Itoa(os.Getpid())), nil, 0o644); err != nil {
		return err
	}
	for {
		marks, err := os.ReadDir(dir)
		if err != nil {
			return err
		}
		if len(marks) >= parties {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("barrier: %d of %d arrived", len(marks), parties)
		case <-time.After(5 * time.Millisecond):
		}
	}
}

func main() {
	if msg := os.Getenv("ECHO_INIT_ERROR"); msg != "" {
		// What a custom runtime does when its init fails: report, then exit.
		body := strings.NewReader(`{"errorMessage":"` + msg + `","errorType":"Runtime.ConfigError"}`)
		resp, err := http.Post("http://"+os.Getenv("AWS_LAMBDA_RUNTIME_API")+"/2018-06-01/runtime/init/error", "application/json", body)
		if err == nil {
			resp.Body.Close()
		}
		os.Exit(1)
	}
	lambda.Start(handle)
}
