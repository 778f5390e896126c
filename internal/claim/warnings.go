package claim

import (
	"slices"
	"sync"
)

// Warnings collects an operation's warnings (a Claimer's Warn), which may
// come from its goroutines, each once and in the order they came.
type Warnings struct {
	mu   sync.Mutex
	list [][2]string
}

// Add records a warning, unless it was recorded already.
func (w *Warnings) Add(summary, detail string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if x := [2]string{summary, detail}; !slices.Contains(w.list, x) {
		w.list = append(w.list, x)
	}
}

// List is the warnings recorded, each as summary and detail.
func (w *Warnings) List() [][2]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return slices.Clone(w.list)
}
