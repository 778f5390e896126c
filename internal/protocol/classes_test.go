package protocol

import (
	"slices"
	"strings"
	"testing"
)

func TestValidateResourceClasses(t *testing.T) {
	tests := []struct {
		name    string
		classes map[string]ResourceClass
		wantErr []string // substrings; nil means valid
	}{
		{name: "defaults", classes: DefaultResourceClasses()},
		{name: "single class", classes: map[string]ResourceClass{"only": {CPU: 1, MemoryMiB: 512}}},
		{name: "nil map", classes: nil, wantErr: []string{"at least one resource class"}},
		{name: "empty map", classes: map[string]ResourceClass{}, wantErr: []string{"at least one resource class"}},
		{name: "zero cpu", classes: map[string]ResourceClass{"large": {CPU: 2, MemoryMiB: 4096}, "tiny": {CPU: 0, MemoryMiB: 1024}},
			wantErr: []string{`"tiny"`, "must be positive", "cpu 0"}},
		{name: "negative cpu", classes: map[string]ResourceClass{"neg": {CPU: -2, MemoryMiB: 1024}},
			wantErr: []string{`"neg"`, "must be positive", "cpu -2"}},
		{name: "zero memory", classes: map[string]ResourceClass{"large": {CPU: 2, MemoryMiB: 0}},
			wantErr: []string{`"large"`, "must be positive", "memory_mib 0"}},
		{name: "negative memory", classes: map[string]ResourceClass{"large": {CPU: 2, MemoryMiB: -1}},
			wantErr: []string{`"large"`, "must be positive", "memory_mib -1"}},
		{name: "duplicate cpu", classes: map[string]ResourceClass{"a": {CPU: 4, MemoryMiB: 8192}, "b": {CPU: 4, MemoryMiB: 16384}},
			wantErr: []string{`"a"`, `"b"`, "same cpu 4"}},
		{name: "duplicate cpu among defaults", classes: func() map[string]ResourceClass {
			c := DefaultResourceClasses()
			c["xlarge_alt"] = ResourceClass{CPU: 4, MemoryMiB: 10000}
			return c
		}(), wantErr: []string{`"xlarge"`, `"xlarge_alt"`, "same cpu 4"}},
		{name: "memory equal while cpu increases", classes: map[string]ResourceClass{"small": {CPU: 2, MemoryMiB: 4096}, "big": {CPU: 4, MemoryMiB: 4096}},
			wantErr: []string{`"big"`, `"small"`, "strictly increase"}},
		{name: "memory decreasing while cpu increases", classes: map[string]ResourceClass{"small": {CPU: 2, MemoryMiB: 8192}, "big": {CPU: 4, MemoryMiB: 4096}},
			wantErr: []string{`"big"`, `"small"`, "strictly increase"}},
		{name: "memory decreasing at the end", classes: map[string]ResourceClass{
			"s": {CPU: 1, MemoryMiB: 1000}, "m": {CPU: 2, MemoryMiB: 2000}, "l": {CPU: 3, MemoryMiB: 1500}},
			wantErr: []string{`"l"`, `"m"`, "strictly increase"}},
		{name: "map order irrelevant, increasing", classes: map[string]ResourceClass{
			"z": {CPU: 1, MemoryMiB: 1000}, "a": {CPU: 8, MemoryMiB: 9000}, "m": {CPU: 2, MemoryMiB: 2000}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ValidateResourceClasses(tt.classes)
			if tt.wantErr == nil {
				if err != nil {
					t.Fatalf("ValidateResourceClasses = %v, want nil", err)
				}
				return
			}
			if err == nil {
				t.Fatalf("ValidateResourceClasses = nil, want an error mentioning %q", tt.wantErr)
			}
			for _, want := range tt.wantErr {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("ValidateResourceClasses = %q, want it to mention %q", err, want)
				}
			}
		})
	}
}

func TestDefaultResourceClasses(t *testing.T) {
	want := map[string]ResourceClass{
		"large":    {CPU: 2, MemoryMiB: 4096},
		"xlarge":   {CPU: 4, MemoryMiB: 8192},
		"2xlarge":  {CPU: 8, MemoryMiB: 16384},
		"4xlarge":  {CPU: 16, MemoryMiB: 32768},
		"8xlarge":  {CPU: 32, MemoryMiB: 65536},
		"12xlarge": {CPU: 48, MemoryMiB: 98304},
		"16xlarge": {CPU: 64, MemoryMiB: 131072},
	}
	got := DefaultResourceClasses()
	if len(got) != len(want) {
		t.Fatalf("DefaultResourceClasses has %d classes, want %d", len(got), len(want))
	}
	for n, c := range want {
		if got[n] != c {
			t.Errorf("DefaultResourceClasses()[%q] = %+v, want %+v", n, got[n], c)
		}
	}
	// Each call returns a fresh map.
	got["large"] = ResourceClass{CPU: 99, MemoryMiB: 1}
	if DefaultResourceClasses()["large"] != want["large"] {
		t.Error("mutating the result of DefaultResourceClasses changed a later result")
	}
}

func TestSortedClassNames(t *testing.T) {
	tests := []struct {
		name    string
		classes map[string]ResourceClass
		want    []string
	}{
		{name: "empty", classes: map[string]ResourceClass{}, want: []string{}},
		{name: "defaults by cpu, not by name", classes: DefaultResourceClasses(),
			want: []string{"large", "xlarge", "2xlarge", "4xlarge", "8xlarge", "12xlarge", "16xlarge"}},
		{name: "ties broken by name", classes: map[string]ResourceClass{
			"c": {CPU: 2}, "a": {CPU: 2}, "b": {CPU: 1}, "d": {CPU: 2}},
			want: []string{"b", "a", "c", "d"}},
		{name: "negative and zero cpu sort first", classes: map[string]ResourceClass{
			"x": {CPU: 1}, "y": {CPU: 0}, "z": {CPU: -1}},
			want: []string{"z", "y", "x"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for range 20 { // map iteration order is random: repeat
				if got := SortedClassNames(tt.classes); !slices.Equal(got, tt.want) {
					t.Fatalf("SortedClassNames = %q, want %q", got, tt.want)
				}
			}
		})
	}
}
