package github

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"reflect"
	"strings"
	"sync/atomic"
	"testing"
)

// The request is GitHub's: a JSON body with the name, labels, runner group
// and work folder, with the client's headers; a server error is retried as
// every call's is, and the answer's configuration never reaches an error.
func TestGenerateJITConfigWire(t *testing.T) {
	var attempts atomic.Int32
	var body map[string]any
	s := newStub(t, func(w http.ResponseWriter, r *http.Request) {
		if attempts.Add(1) == 1 {
			reply(w, http.StatusBadGateway, "")
			return
		}
		b, _ := io.ReadAll(r.Body)
		if r.Header.Get("Content-Type") != "application/json" || json.Unmarshal(b, &body) != nil {
			reply(w, http.StatusBadRequest, map[string]string{"message": "Problems parsing JSON"})
			return
		}
		reply(w, http.StatusCreated, map[string]any{"runner": map[string]any{"id": 23, "name": "i-1-k2m4"}, "encoded_jit_config": "SECRETCONFIG"})
	})
	c := newTestClient(t, Config{BaseURL: s.URL, Token: pat})
	r, err := c.GenerateJITConfig(context.Background(), Target{"octo", "app"}, JITRequest{Name: "i-1-k2m4", Labels: []string{"run-1-abcdefgh23456"}, RunnerGroupID: DefaultRunnerGroupID})
	if err != nil || r != (JITRunner{ID: 23, Name: "i-1-k2m4", EncodedConfig: "SECRETCONFIG"}) {
		t.Fatalf("GenerateJITConfig = %+v, %v", r, err)
	}
	want := map[string]any{"name": "i-1-k2m4", "labels": []any{"run-1-abcdefgh23456"}, "runner_group_id": float64(1), "work_folder": "_work"}
	if !reflect.DeepEqual(body, want) {
		t.Errorf("body %v, want %v", body, want)
	}
	reqs := s.requests()
	if len(reqs) != 2 || reqs[1].method != http.MethodPost || reqs[1].path != "/repos/octo/app/actions/runners/generate-jitconfig" {
		t.Fatalf("requests %+v; want the POST retried once", reqs)
	}
	assertHeaders(t, reqs[1].header, "Bearer "+pat)

	s = newStub(t, func(w http.ResponseWriter, r *http.Request) {
		reply(w, http.StatusCreated, map[string]any{"runner": map[string]any{"name": "i-1-k2m4"}, "encoded_jit_config": "SECRETCONFIG"})
	})
	c = newTestClient(t, Config{BaseURL: s.URL, Token: pat})
	_, err = c.GenerateJITConfig(context.Background(), Target{"octo", "app"}, JITRequest{Name: "i-1-k2m4", Labels: []string{"x"}, RunnerGroupID: 1})
	if err == nil || strings.Contains(err.Error(), "SECRETCONFIG") {
		t.Errorf("an answer without a runner id: %v; want an error without the configuration", err)
	}
}
