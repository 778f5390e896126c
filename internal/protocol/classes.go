package protocol

import (
	"fmt"
	"sort"
)

// DefaultResourceClasses are the seeds' seven classes.
func DefaultResourceClasses() map[string]ResourceClass {
	return map[string]ResourceClass{
		"large":    {CPU: 2, MemoryMiB: 4096},
		"xlarge":   {CPU: 4, MemoryMiB: 8192},
		"2xlarge":  {CPU: 8, MemoryMiB: 16384},
		"4xlarge":  {CPU: 16, MemoryMiB: 32768},
		"8xlarge":  {CPU: 32, MemoryMiB: 65536},
		"12xlarge": {CPU: 48, MemoryMiB: 98304},
		"16xlarge": {CPU: 64, MemoryMiB: 131072},
	}
}

// ValidateResourceClasses checks that the classes are non-empty, have
// positive unique cpu counts, and that memory strictly increases with cpu,
// so every runner belongs to exactly one class.
func ValidateResourceClasses(classes map[string]ResourceClass) error {
	if len(classes) == 0 {
		return fmt.Errorf("at least one resource class is required")
	}
	names := SortedClassNames(classes)
	for _, n := range names {
		c := classes[n]
		if c.CPU <= 0 || c.MemoryMiB <= 0 {
			return fmt.Errorf("resource class %q: cpu and memory_mib must be positive, got cpu %d, memory_mib %d", n, c.CPU, c.MemoryMiB)
		}
	}
	for i := 1; i < len(names); i++ {
		prev, cur := classes[names[i-1]], classes[names[i]]
		if prev.CPU == cur.CPU {
			return fmt.Errorf("resource classes %q and %q have the same cpu %d; cpu values must be unique", names[i-1], names[i], cur.CPU)
		}
		if cur.MemoryMiB <= prev.MemoryMiB {
			return fmt.Errorf("resource class %q (cpu %d) has memory_mib %d, not more than %q (cpu %d, memory_mib %d); memory must strictly increase with cpu",
				names[i], cur.CPU, cur.MemoryMiB, names[i-1], prev.CPU, prev.MemoryMiB)
		}
	}
	return nil
}

// SortedClassNames lists class names by cpu, then name.
func SortedClassNames(classes map[string]ResourceClass) []string {
	names := make([]string, 0, len(classes))
	for n := range classes {
		names = append(names, n)
	}
	sort.Slice(names, func(i, j int) bool {
		a, b := classes[names[i]], classes[names[j]]
		if a.CPU != b.CPU {
			return a.CPU < b.CPU
		}
		return names[i] < names[j]
	})
	return names
}
