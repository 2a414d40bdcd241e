/* backends/cpu/score.c — the CPU plugin's variant score.  Compiled for the
 * baseline ISA in every variant (see Makefile.am), because the loader calls
 * it before choosing: code built for AVX2 must not run on a machine without
 * it, not even to ask. */
#include "cpu.h"

int cpu__score(void)
{
#if CPU_VARIANT_AVX2
#if defined(__x86_64__) || defined(__i386__)
    /* libgcc's detection also checks that the OS saves the AVX state */
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") ? 20 : -1;
#else
    return -1;
#endif
#else
    return 10;
#endif
}
