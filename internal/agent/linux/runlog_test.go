package linux

import (
	"fmt"
	"strings"
	"testing"
)

// The runner's output reaches the log a line at a time, quoted (a job's
// control characters cannot forge log lines) and cut to maxLogLine bytes:
// a line with no end holds no more than that, however much is written.
func TestLineLogIsBounded(t *testing.T) {
	var logged []string
	w := &lineLog{logf: func(format string, args ...any) { logged = append(logged, fmt.Sprintf(format, args...)) }, prefix: "runner: "}
	fmt.Fprint(w, "Listening for Jobs\nfake\r\x1b[2Kagent: line\n")
	chunk := strings.Repeat("x", 4096)
	for range 1000 {
		fmt.Fprint(w, chunk)
		if len(w.line) > maxLogLine {
			t.Fatalf("the unended line holds %d bytes, more than %d", len(w.line), maxLogLine)
		}
	}
	fmt.Fprint(w, "\n")
	want := []string{`runner: "Listening for Jobs"`, `runner: "fake\r\x1b[2Kagent: line"`, `runner: "` + strings.Repeat("x", maxLogLine) + `" (cut)`}
	if len(logged) != len(want) {
		t.Fatalf("logged %d lines, want %d", len(logged), len(want))
	}
	for i := range want {
		if logged[i] != want[i] {
			t.Errorf("line %d: %.80q, want %.80q", i, logged[i], want[i])
		}
	}
}
