/* backends/cpu/score.c — the CPU plugin's variant score.  Compiled for the
 * baseline ISA in every variant (see Makefile.am), because the loader calls
 * it before choosing: code built for AVX2 or AVX-512 must not run on a
 * machine without it, not even to ask. */
#if CPU_VARIANT_AVX512 && (defined(__x86_64__) || defined(__i386__))
#include <cpuid.h>
#endif

#include "cpu.h"

#if CPU_VARIANT_AVX512 && (defined(__x86_64__) || defined(__i386__))
/* AVX-512 F, BW, VL and DQ (what the variant is compiled with, -mavx512*,
 * plus FMA and F16C), and an OS that saves the opmask and all 32 ZMM
 * registers on a context switch (XCR0 bits 1, 2, 5, 6, 7): the CPU can
 * have AVX-512 while the kernel or hypervisor has it switched off. */
static bool avx512_usable(void)
{
    unsigned a, b, c, d;
    if (!__get_cpuid(1, &a, &b, &c, &d))
        return false;
    bool osxsave = c & (1u << 27), fma = c & (1u << 12), f16c = c & (1u << 29);
    if (!osxsave || !fma || !f16c)
        return false;
    unsigned lo, hi;
    /* xgetbv by its bytes: the mnemonic needs -mxsave, which this file,
     * compiled for the baseline, does not get */
    __asm__ volatile(".byte 0x0f, 0x01, 0xd0" : "=a"(lo), "=d"(hi) : "c"(0));
    (void)hi;
    const unsigned xcr0_needed = (1u << 1) | (1u << 2) | (1u << 5) | (1u << 6) | (1u << 7);
    if ((lo & xcr0_needed) != xcr0_needed)
        return false;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d))
        return false;
    const unsigned f = 1u << 16, dq = 1u << 17, bw = 1u << 30, vl = 1u << 31;
    return (b & (f | dq | bw | vl)) == (f | dq | bw | vl);
}
#endif

int cpu__score(void)
{
#if CPU_VARIANT_AVX512
#if defined(__x86_64__) || defined(__i386__)
    return avx512_usable() ? 30 : -1;
#else
    return -1;
#endif
#elif CPU_VARIANT_AVX2
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
