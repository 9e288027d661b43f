public import ActivityWorkload

/// SplitMix64: a deterministic generator, so a failing randomized trial can be replayed from
/// its seed (print the seed in the failure message). The workload generator's own, reused.
public typealias SplitMix64 = SeededRandom
