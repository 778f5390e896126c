package bench

import (
	"fmt"
	"slices"
	"strings"
	"sync"
)

// summaryRow is one line of the summary table printed after the run.
type summaryRow struct {
	Section  string
	Scenario string
	Ours     string
	Baseline string
	Ratio    string
	Target   string
	Met      string // "yes", "no", or "" when the scenario has no target
}

// summaryTable collects rows by section and scenario; a benchmark that runs
// more than once (b.N rounds) replaces its row.
type summaryTable struct {
	mu        sync.Mutex
	rows      []summaryRow
	breakdown []string // calls by action, per scenario of ours
	notes     []string
}

var summary summaryTable

func (s *summaryTable) add(r summaryRow) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, old := range s.rows {
		if old.Section == r.Section && old.Scenario == r.Scenario {
			s.rows[i] = r
			return
		}
	}
	s.rows = append(s.rows, r)
}

func (s *summaryTable) addBreakdown(line string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	key, _, _ := strings.Cut(line, ":")
	for i, old := range s.breakdown {
		if k, _, _ := strings.Cut(old, ":"); k == key {
			s.breakdown[i] = line
			return
		}
	}
	s.breakdown = append(s.breakdown, line)
}

func (s *summaryTable) note(n string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, old := range s.notes {
		if old == n {
			return
		}
	}
	s.notes = append(s.notes, n)
}

// markdown renders the table, one section after the other, or "" when no
// benchmark reported anything.
func (s *summaryTable) markdown() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.rows) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("## Benchmark summary (issue 6)\n")
	var sections []string
	seen := map[string]bool{}
	for _, r := range s.rows {
		if !seen[r.Section] {
			seen[r.Section] = true
			sections = append(sections, r.Section)
		}
	}
	slices.Sort(sections) // "0. ...", "1. ...": the order
	for _, sec := range sections {
		fmt.Fprintf(&b, "\n### %s\n\n", sec)
		b.WriteString("| scenario | ours | baseline | ratio | target | met |\n|---|---|---|---|---|---|\n")
		for _, r := range s.rows {
			if r.Section != sec {
				continue
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", r.Scenario, dash(r.Ours), dash(r.Baseline), dash(r.Ratio), dash(r.Target), dash(r.Met))
		}
	}
	if len(s.breakdown) > 0 {
		b.WriteString("\n### Calls by action (ours, and the baseline's where marked)\n\n")
		lines := slices.Clone(s.breakdown)
		slices.Sort(lines)
		for _, l := range lines {
			b.WriteString("- " + l + "\n")
		}
	}
	if len(s.notes) > 0 {
		b.WriteString("\n### Notes\n\n")
		for _, n := range s.notes {
			b.WriteString("- " + n + "\n")
		}
	}
	return b.String()
}

func dash(s string) string {
	if s == "" {
		return "–"
	}
	return s
}

func yesNo(ok bool) string {
	if ok {
		return "yes"
	}
	return "no"
}
