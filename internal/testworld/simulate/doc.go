// Package simulate replays days of CI traffic (traces of workflow runs)
// through the pool's warm policies, and measures each job's time to runner
// and what the pool costs. The claims, releases, reaps and fills are the
// real claim code (package claim), and the runners' agents the real agent
// (package agent) on simulated machines (package agenttest), all on the
// in-memory AWS fakes (package awsfake) and a virtual clock (Clock, World,
// settle.go).
//
// What the replay still models itself, and why:
//
//   - AWS's latencies and prices (model.go): an instance's agent boots
//     ColdBoot after its launch and StoppedStart after its start, its
//     preparation included (the fake machine installs and prepares at
//     once). A runner a claim launched boots at once instead, its boot
//     counted in its job's wait (LatencyBySource): the claim waiting for it
//     on the clock would change nothing measured, and cost hundreds of
//     steps of the clock per claim.
//   - When agents act. The replay is event-driven: it runs the agent's
//     steps (Heartbeat, Boot, Poll, SelfCheck), not agent.Run, whose loops
//     poll every 250 ms and heartbeat every 5 s, millions of events over
//     days of virtual time. An agent acts within the write that changes its
//     record (awsfake.Table.AfterInstance), where its poll would have
//     found the change within 250 ms, which the hot claim's measured
//     latency includes; it heartbeats whenever it acts, so claims find its
//     heartbeat as fresh as the heartbeat loop keeps it; and it self-checks
//     only at the first of its checks (every SelfCheckInterval from its
//     boot) that can act on its record, past its threshold and the grace.
//
// Everything else, which runner a claim gets, when a runner registers,
// confirms its release, stops or terminates its instance, is the real
// code deciding.
package simulate
