package claim

import (
	"fmt"
	"reflect"
	"sync"
	"testing"
)

// Warnings from an operation's goroutines are kept each once, in the order
// they first came.
func TestWarningsKeepsEachOnce(t *testing.T) {
	var w Warnings
	var wg sync.WaitGroup
	for i := range 20 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			w.Add("Spot capacity short", fmt.Sprintf("runner %d", i%2))
		}()
	}
	wg.Wait()
	got := w.List()
	if len(got) != 2 || got[0] == got[1] {
		t.Fatalf("warnings %v, want the two distinct ones once each", got)
	}
	w.Add("Later", "one")
	if want := append(got, [2]string{"Later", "one"}); !reflect.DeepEqual(w.List(), want) {
		t.Errorf("warnings %v, want %v", w.List(), want)
	}
}
