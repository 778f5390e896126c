package protocol

import (
	"fmt"
	"strings"
	"testing"
)

func TestValidatePoolName(t *testing.T) {
	tests := []struct {
		name    string
		pool    string
		wantErr []string // substrings of the error; nil means valid
	}{
		{name: "empty", pool: "", wantErr: []string{"3-40", "got 0"}},
		{name: "two chars", pool: "ab", wantErr: []string{"3-40", "DynamoDB table", "got 2"}},
		{name: "three chars", pool: "abc"},
		{name: "40 chars", pool: strings.Repeat("p", 40)},
		{name: "41 chars", pool: strings.Repeat("p", 41), wantErr: []string{"3-40", "got 41"}},
		{name: "letters digits mixed case", pool: "CiPool42"},
		{name: "underscore and dash", pool: "my_pool-1"},
		{name: "only dashes", pool: "---"},
		{name: "only underscores", pool: "___"},
		{name: "space", pool: "my pool", wantErr: []string{`"my pool"`, "only letters, digits, '_' and '-'"}},
		{name: "dot", pool: "my.pool", wantErr: []string{`"my.pool"`, "only letters, digits"}},
		{name: "slash", pool: "my/pool", wantErr: []string{`"my/pool"`, "only letters, digits"}},
		{name: "colon", pool: "my:pool", wantErr: []string{"only letters, digits"}},
		{name: "unicode letter", pool: "pööl", wantErr: []string{"only letters, digits"}},
		{name: "trailing newline", pool: "pool\n", wantErr: []string{"only letters, digits"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidatePoolName(tt.pool)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("ValidatePoolName(%q) = %v, want nil", tt.pool, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ValidatePoolName(%q) = nil, want an error", tt.pool)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("ValidatePoolName(%q) = %q, want it to mention %q", tt.pool, err, want)
				}
			}
		})
	}
}

func TestValidateClassName(t *testing.T) {
	pool40 := strings.Repeat("p", 40)
	tests := []struct {
		name    string
		pool    string
		class   string
		wantErr []string
	}{
		{name: "default class", pool: "ci", class: "large"},
		{name: "digits first", pool: "ci", class: "2xlarge"},
		{name: "underscore", pool: "ci", class: "gpu_big_1"},
		{name: "upper case", pool: "ci", class: "GPU"},
		// The last '-' of a queue name separates pool and class: pool a-b's
		// class c and pool a's class b-c would both be a-b-c.
		{name: "dash", pool: "a", class: "b-c", wantErr: []string{`"b-c"`, "only letters, digits and '_', not '-'", "<pool>-<class>", "a-b-c"}},
		{name: "only a dash", pool: "ci", class: "-", wantErr: []string{"not '-'"}},
		{name: "trailing dash", pool: "ci", class: "large-", wantErr: []string{"not '-'"}},
		{name: "empty", pool: "ci", class: "", wantErr: []string{"must not be empty"}},
		{name: "space", pool: "ci", class: "x large", wantErr: []string{`"x large"`, "only letters, digits"}},
		{name: "dot", pool: "ci", class: "x.large", wantErr: []string{"only letters, digits"}},
		{name: "slash", pool: "ci", class: "x/large", wantErr: []string{"only letters, digits"}},
		{name: "unicode", pool: "ci", class: "größe", wantErr: []string{"only letters, digits"}},
		// pool + "-" + class: 40 + 1 + 39 = 80
		{name: "queue name exactly 80", pool: pool40, class: strings.Repeat("c", 39)},
		{name: "queue name 81", pool: pool40, class: strings.Repeat("c", 40),
			wantErr: []string{"81 characters", "at most 80", pool40 + "-" + strings.Repeat("c", 40)}},
		// 10 + 1 + 69 = 80
		{name: "short pool, queue name exactly 80", pool: strings.Repeat("p", 10), class: strings.Repeat("c", 69)},
		{name: "short pool, queue name 81", pool: strings.Repeat("p", 10), class: strings.Repeat("c", 70),
			wantErr: []string{"81 characters", "at most 80"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateClassName(tt.pool, tt.class)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("ValidateClassName(%q, %q) = %v, want nil", tt.pool, tt.class, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ValidateClassName(%q, %q) = nil, want an error", tt.pool, tt.class)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("ValidateClassName(%q, %q) = %q, want it to mention %q", tt.pool, tt.class, err, want)
				}
			}
		})
	}
}

func TestQueueAndTableName(t *testing.T) {
	tests := []struct {
		pool, class          string
		wantQueue, wantTable string
	}{
		{pool: "ci", class: "large", wantQueue: "ci-large", wantTable: "ci"},
		{pool: "my_pool-1", class: "2xlarge", wantQueue: "my_pool-1-2xlarge", wantTable: "my_pool-1"},
	}
	for _, tt := range tests {
		if got := QueueName(tt.pool, tt.class); got != tt.wantQueue {
			t.Errorf("QueueName(%q, %q) = %q, want %q", tt.pool, tt.class, got, tt.wantQueue)
		}
		if got := TableName(tt.pool); got != tt.wantTable {
			t.Errorf("TableName(%q) = %q, want %q", tt.pool, got, tt.wantTable)
		}
	}
}

// TestQueueNamesDoNotCollide: with '-' only in pool names, the last '-' of a
// queue name tells its pool and class apart.
func TestQueueNamesDoNotCollide(t *testing.T) {
	pools := []string{"aaa", "aaa-b", "aaa-b-c", "a_b", "ci-runners", "---", "aa-"}
	classes := []string{"b", "c", "b_c", "large", "2xlarge", "_"}
	seen := map[string]string{}
	for _, p := range pools {
		for _, c := range classes {
			if ValidatePoolName(p) != nil || ValidateClassName(p, c) != nil {
				t.Fatalf("pool %q, class %q: not valid", p, c)
			}
			q := QueueName(p, c)
			if other, dup := seen[q]; dup {
				t.Errorf("queue %s is both %s and pool %q class %q", q, other, p, c)
			}
			seen[q] = fmt.Sprintf("pool %q class %q", p, c)
			i := strings.LastIndex(q, "-")
			if q[:i] != p || q[i+1:] != c {
				t.Errorf("queue %s splits at its last '-' into %q and %q, want %q and %q", q, q[:i], q[i+1:], p, c)
			}
		}
	}
}

func TestValidateRunID(t *testing.T) {
	tests := []struct {
		name    string
		id      string
		wantErr []string // substrings of the error; nil means valid
	}{
		{name: "generated", id: "run-0123456789abcdef"},
		{name: "workflow run and attempt", id: "12345678901-1"},
		{name: "dots and underscores", id: "build_1.2-x"},
		{name: "one character", id: "r"},
		{name: "100 characters", id: strings.Repeat("r", 100)},
		{name: "capital", id: "Run-1", wantErr: []string{`"Run-1"`, "must be lower case", "case-insensitively", `"run-1"`, "share one label"}},
		{name: "all capitals", id: "RUN", wantErr: []string{"must be lower case", `"run"`}},
		{name: "capital and a bad character", id: "Run 1", wantErr: []string{`"Run 1"`, "lower-case letters, digits"}},
		{name: "empty", id: "", wantErr: []string{"1-100 characters of lower-case letters"}},
		{name: "101 characters", id: strings.Repeat("r", 101), wantErr: []string{"1-100 characters"}},
		{name: "starting with a dash", id: "-run", wantErr: []string{"starting with a letter or digit"}},
		{name: "starting with a dot", id: ".run", wantErr: []string{"starting with a letter or digit"}},
		{name: "space", id: "my run", wantErr: []string{`"my run"`}},
		{name: "slash", id: "pool/run", wantErr: []string{`"pool/run"`}},
		{name: "unicode letter", id: "rün", wantErr: []string{"lower-case letters"}},
		{name: "kelvin sign", id: "\u212a", wantErr: []string{"run id"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateRunID(tt.id)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("ValidateRunID(%q) = %v, want nil", tt.id, err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ValidateRunID(%q) = nil, want an error", tt.id)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("ValidateRunID(%q) = %q, want it to mention %q", tt.id, err, want)
				}
			}
		})
	}
}
