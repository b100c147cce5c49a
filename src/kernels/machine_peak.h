/*
 * machine_peak.h - this machine's limits, measured for `kztts bench`: the DRAM read
 * bandwidth and the FMA throughput of a given number of threads.
 *
 * The bench divides a stage's work by these limits to get its floor (the fastest the
 * stage could run here): weight bytes / read bandwidth for the talker and the code
 * predictor, floating-point operations / FMA peak for the codec decoder. Each
 * measurement runs on a thread pool of the stage's thread count (the caller included).
 * Public as kztts.h's kz_experimental_machine_read_gbs / _fma_gflops.
 */
#ifndef KZ_MACHINE_PEAK_H
#define KZ_MACHINE_PEAK_H

/* Streaming read of a 256 MB buffer (far larger than the last-level cache a core sees) by
 * n_threads threads, best of three passes. Returns GB/s, or 0 if out of memory. */
double kz_machine_read_gbs(int n_threads);

/* Independent FMA chains on n_threads threads at the kernel level `isa` (the name the
 * model's kernel table reports: "avx512", "avx2", "neon"; anything else, "scalar"
 * included, runs a portable vector loop of separate multiplies and adds, as the
 * baseline-ISA code compiles), or the bf16 peak of the codec's fast precision with the
 * name of the bf16 GEMM in use ("amx": AMX-BF16 tiles, "avx512bf16": vdpbf16ps; only
 * where the library's dispatch installed that GEMM). Best of three ~20 ms passes, each
 * thread timed by its own CPU time. Returns GFLOP/s (2 per FMA), or 0 on failure; *loop
 * names the loop that ran (static string). */
double kz_machine_fma_gflops(const char *isa, int n_threads, const char **loop);

/* The round trip of one cache line between the calling thread and a second one (a value
 * written, returned), fastest of up to 40 trials of 256 rounds within ~0.3 s. Returns
 * ns, or 0 when fewer than two CPUs are allowed or no trial finished (on a loaded
 * machine the partner may not run at the same time). */
double kz_machine_core_rt_ns(void);

#endif
