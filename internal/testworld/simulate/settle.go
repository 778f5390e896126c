package simulate

import (
	"bytes"
	"reflect"
	"runtime"
	"strings"
	"sync"
)

// The driver moves the virtual clock only when nothing in the simulation
// can run without it: every goroutine of the replay (the events it runs
// and the goroutines the claim code starts for them) is blocked, on the
// clock, on a channel, or waiting for another of them. That keeps a replay
// deterministic whatever the machine's load: a claim whose runners boot
// waits on the clock while other runs come and go, and no goroutine sees
// time move while it is still working at an instant.
//
// Go tells which goroutines are blocked only in its tracebacks (what
// testing/synctest decides internally, and offers only inside a test), so
// settled reads them: a goroutine of this module counts as blocked in the
// states below, and as running in any other (runnable, running, in a
// system call, or waiting for a mutex, which another goroutine holds
// while it runs). Goroutines without a frame of this module (the testing
// framework, the runtime's helpers) are not the replay's.

// blockedStates are the traceback states of a goroutine that only
// another goroutine, or the driver, can wake.
var blockedStates = map[string]bool{
	"chan receive": true, "chan send": true, "select": true,
	"chan receive (nil chan)": true, "chan send (nil chan)": true, "select (no cases)": true,
	"sync.WaitGroup.Wait": true, "sync.Cond.Wait": true,
	"sleep": true, // time.Sleep: only drivers (this file's callers) use it
}

// modulePrefix is what the frames of this module's internal packages
// start with (this package is internal/testworld/simulate).
var modulePrefix = []byte(strings.TrimSuffix(reflect.TypeFor[Clock]().PkgPath(), "testworld/simulate"))

var traceBuf = struct {
	sync.Mutex
	b []byte
}{b: make([]byte, 1<<20)}

// settled tells whether every goroutine of this module, but the caller, is
// blocked.
func settled() bool {
	traceBuf.Lock()
	defer traceBuf.Unlock()
	var n int
	for {
		n = runtime.Stack(traceBuf.b, true)
		if n < len(traceBuf.b) {
			break
		}
		traceBuf.b = make([]byte, 2*len(traceBuf.b))
	}
	// The caller's own traceback comes first.
	goroutines := bytes.Split(traceBuf.b[:n], []byte("\n\n"))
	for _, g := range goroutines[1:] {
		if !bytes.Contains(g, modulePrefix) {
			continue
		}
		if !blockedStates[tracebackState(g)] {
			return false
		}
	}
	return true
}

// tracebackState is the state in a goroutine's traceback header,
// "goroutine 7 [chan receive, 2 minutes]:", without what follows a comma.
func tracebackState(g []byte) string {
	open, end := bytes.IndexByte(g, '['), bytes.IndexByte(g, ']')
	if open < 0 || end < open {
		return ""
	}
	state, _, _ := strings.Cut(string(g[open+1:end]), ", ")
	return state
}
