package poolworld

import (
	"testing"
	"time"

	"github.com/ec2runners/terraform-provider-ec2runners/internal/protocol"
)

// Upgrade is a way a pool moves to a new launch template.
type Upgrade struct {
	Name  string
	Apply func(w *World, cfg *protocol.PoolConfig)
	// the template and version the pool launches after it
	ID, Version string
}

// Upgrades are how a pool moves to a new launch template: a new default
// version of the same template (the pool launches $Default), or a replaced
// template (a new id, version 1 again, created now), the pool applied with
// its id.
var Upgrades = []Upgrade{
	{"new default version", func(w *World, _ *protocol.PoolConfig) { w.EC2.LtVersion = 2 }, "lt-0123", "2"},
	{"replaced template", func(w *World, cfg *protocol.PoolConfig) {
		w.EC2.LtID, w.EC2.LtCreated = "lt-new", time.Now().Add(-time.Minute)
		cfg.Fleet.LaunchTemplateID = "lt-new"
		w.WriteConfig(*cfg)
	}, "lt-new", "1"},
}

// CheckLaunchedFrom asserts that a runner's record says it was launched
// from the template and version.
func (w *World) CheckLaunchedFrom(t *testing.T, id, template, version string) {
	t.Helper()
	if r := w.DB.Instance(t, id); r.TemplateID != template || r.TemplateVersion != version || r.LaunchedAt == "" {
		t.Errorf("%s: record says launched at %q from %q version %q, want from %s version %s", id, r.LaunchedAt, r.TemplateID, r.TemplateVersion, template, version)
	}
}
