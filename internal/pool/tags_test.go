package pool

import (
	"maps"
	"slices"
	"testing"
)

func TestTagChanges(t *testing.T) {
	tests := []struct {
		name       string
		have, want map[string]string
		wantSet    map[string]string
		wantRemove []string
	}{
		{name: "both empty", have: nil, want: nil, wantSet: map[string]string{}},
		{name: "add to nothing", have: nil, want: map[string]string{"a": "1"}, wantSet: map[string]string{"a": "1"}},
		{name: "unchanged", have: map[string]string{"a": "1", "b": "2"}, want: map[string]string{"a": "1", "b": "2"}, wantSet: map[string]string{}},
		{name: "value changed", have: map[string]string{"a": "1", "b": "2"}, want: map[string]string{"a": "1", "b": "3"}, wantSet: map[string]string{"b": "3"}},
		{name: "all removed, sorted", have: map[string]string{"z": "1", "a": "2", "m": "3"}, want: nil,
			wantSet: map[string]string{}, wantRemove: []string{"a", "m", "z"}},
		{name: "mixed", have: map[string]string{"keep": "x", "change": "old", "drop": "y", "drop2": "z"},
			want:       map[string]string{"keep": "x", "change": "new", "add": "w"},
			wantSet:    map[string]string{"change": "new", "add": "w"},
			wantRemove: []string{"drop", "drop2"}},
		{name: "empty value is a value", have: map[string]string{"a": ""}, want: map[string]string{"a": "", "b": ""},
			wantSet: map[string]string{"b": ""}},
		{name: "value to empty", have: map[string]string{"a": "1"}, want: map[string]string{"a": ""}, wantSet: map[string]string{"a": ""}},
		{name: "removing an empty-valued tag", have: map[string]string{"a": ""}, want: map[string]string{},
			wantSet: map[string]string{}, wantRemove: []string{"a"}},
		{name: "keys are case-sensitive", have: map[string]string{"Env": "ci"}, want: map[string]string{"env": "ci"},
			wantSet: map[string]string{"env": "ci"}, wantRemove: []string{"Env"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			haveBefore, wantBefore := maps.Clone(tt.have), maps.Clone(tt.want)
			set, remove := tagChanges(tt.have, tt.want)
			if set == nil {
				t.Error("set is nil, want a (possibly empty) map")
			}
			if !maps.Equal(set, tt.wantSet) {
				t.Errorf("set = %v, want %v", set, tt.wantSet)
			}
			if !slices.Equal(remove, tt.wantRemove) {
				t.Errorf("remove = %q, want %q", remove, tt.wantRemove)
			}
			if !maps.Equal(tt.have, haveBefore) || !maps.Equal(tt.want, wantBefore) {
				t.Error("tagChanges modified its arguments")
			}
		})
	}
}
