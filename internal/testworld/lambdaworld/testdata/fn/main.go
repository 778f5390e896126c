// Command fn is the function lambdaworld's tests run: an aws-lambda-go
// function whose event says what to do.
package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"os"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambda"
	"github.com/aws/aws-lambda-go/lambdacontext"
)

type event struct {
	Do      string `json:"do"` // echo, error, panic, exit, sleep, big
	Message string `json:"message,omitempty"`
	Sleep   string `json:"sleep,omitempty"` // for sleep, a duration
}

// echo is what the function saw: the event and its Lambda context.
type echo struct {
	Event           event  `json:"event"`
	RequestID       string `json:"requestId"`
	InvokedARN      string `json:"invokedArn"`
	DeadlineInMs    int64  `json:"deadlineInMs"` // from the invocation's start
	FunctionName    string `json:"functionName"`
	Handler         string `json:"handler"`
	Greeting        string `json:"greeting"` // the configuration's GREETING
	ProcessID       int    `json:"pid"`
	FunctionVersion string `json:"functionVersion"`
}

func handle(ctx context.Context, e event) (any, error) {
	switch e.Do {
	case "error":
		return nil, errors.New(e.Message)
	case "panic":
		panic(e.Message)
	case "exit":
		os.Exit(3)
	case "sleep":
		d, err := time.ParseDuration(e.Sleep)
		if err != nil {
			return nil, err
		}
		time.Sleep(d)
	case "big":
		return strings.Repeat("x", 7<<20), nil
	}
	lc, _ := lambdacontext.FromContext(ctx)
	deadline, _ := ctx.Deadline()
	return echo{
		Event: e, RequestID: lc.AwsRequestID, InvokedARN: lc.InvokedFunctionArn,
		DeadlineInMs: time.Until(deadline).Milliseconds(), FunctionName: lambdacontext.FunctionName,
		Handler: os.Getenv("_HANDLER"), Greeting: os.Getenv("GREETING"), ProcessID: os.Getpid(),
		FunctionVersion: lambdacontext.FunctionVersion,
	}, nil
}

func main() {
	// A function whose init fails says so to the Runtime API, as a custom
	// runtime does (aws-lambda-go itself only exits).
	if msg := os.Getenv("FAIL_INIT"); msg != "" {
		url := "http://" + os.Getenv("AWS_LAMBDA_RUNTIME_API") + "/2018-06-01/runtime/init/error"
		body, _ := json.Marshal(map[string]string{"errorMessage": msg, "errorType": "InitFailed"})
		resp, err := http.Post(url, "application/json", bytes.NewReader(body))
		if err == nil {
			resp.Body.Close()
		}
		os.Exit(1)
	}
	lambda.Start(handle)
}
