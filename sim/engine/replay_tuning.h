// Switches that change how fast a replay runs, never what it reports. They stay out of the public
// ReplayOptions: an embedder has no reason to touch them, and the tests that turn them off compare
// against the reference path (fast_path_test, fleet_test).
#ifndef PREFIXSIM_SIM_ENGINE_REPLAY_TUNING_H_
#define PREFIXSIM_SIM_ENGINE_REPLAY_TUNING_H_

namespace prefixsim {

struct ReplayTuning {
  // The KV manager's fast path (sim/kv/fast_path.h): skip AllocateSlots calls that cannot change
  // anything. false: the slow reference path (tests, the CLI's hidden switch).
  bool kv_fast_path = true;
  // A replica's steps that end before the next arrival run back to back, outside the event queue
  // (sim/fleet/fleet.cc); false queues every step (tests).
  bool replica_run_ahead = true;
  // A fleet's lookups of one prompt on every replica in one walk over the fleet's index
  // (sim/kv/fleet_lookup.cc); false looks each replica up on its own (tests).
  bool fleet_one_walk = true;
  // Fleets of at most this many replicas read each replica's hit at arrival (the exact view: the
  // routing regret, kv_aware's overlaps) from the replica's own pool, with its own lookup, instead
  // of keeping the fleet's index by every replica's store and remove events: the same answers,
  // for N lookups per arrival instead of an index update per block cached or evicted. Past it the
  // index's one walk for every replica holding a prompt's blocks wins (docs/performance.md,
  // "Fleets against an older build"). 0: always the index (tests compare the two).
  int fleet_exact_from_pools_max_replicas = 32;
  // For a process that exits right after Replay returns (the CLI's replay and compare): leave the
  // simulated state (request slots, block tables: ~10^5 small allocations) to the exit instead of
  // freeing it piece by piece, which costs several percent of a replay's wall time. Ignored in
  // sanitizer builds, whose leak checker would report it. Never in a long-lived process.
  bool skip_teardown = false;
};

}  // namespace prefixsim

#endif  // PREFIXSIM_SIM_ENGINE_REPLAY_TUNING_H_
