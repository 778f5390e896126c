package agentsim

// SetBeforeStopRecheck makes s's agents call f between deciding to stop
// their instance and reading their record again. Call it before any agent
// starts.
func SetBeforeStopRecheck(s *Sim, f func(instanceID string)) { s.beforeStopRecheck = f }
