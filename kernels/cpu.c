#include "cpu.h"

#include <cpuid.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

// F16C from CPUID leaf 1 (ECX bit 29): clang 14's __builtin_cpu_supports
// does not know "f16c". AVX2 support (checked first) implies the OS saves
// the YMM state F16C needs.
static int has_f16c(void) {
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}

static pq_isa detect(void) {
    __builtin_cpu_init();
    pq_isa best = PQ_ISA_SCALAR;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c())
        best = PQ_ISA_AVX2;
    if (best == PQ_ISA_AVX2 && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vnni"))
        best = PQ_ISA_AVX512;
    const char *cap = getenv("PQ_ISA");
    if (cap) {
        pq_isa want = strcmp(cap, "scalar") == 0 ? PQ_ISA_SCALAR : strcmp(cap, "avx2") == 0 ? PQ_ISA_AVX2 : best;
        if (want < best) best = want;
    }
    return best;
}

pq_isa pq_cpu_isa(void) {
    static int cached = -1;
    if (cached < 0) cached = (int)detect();
    return (pq_isa)cached;
}

const char *pq_isa_name(pq_isa isa) {
    switch (isa) {
    case PQ_ISA_SCALAR: return "scalar";
    case PQ_ISA_AVX2: return "avx2";
    case PQ_ISA_AVX512: return "avx512";
    }
    return "?";
}

int pq_cpu_sha(void) {
    static int cached = -1;
    if (cached < 0) {
        unsigned a, b, c, d;
        cached = pq_cpu_isa() >= PQ_ISA_AVX2 && __get_cpuid_count(7, 0, &a, &b, &c, &d) && (b & (1u << 29));
    }
    return cached;
}

// Linux's arch_prctl request for a dynamically enabled XSAVE feature, and
// the tile data feature's number.
#define ARCH_REQ_XCOMP_PERM 0x1023
#define XFEATURE_XTILEDATA 18

static int detect_amx(void) {
    const char *cap = getenv("PQ_ISA"); // a level below AMX named there caps it (as pq_cpu_isa reads it)
    if (pq_cpu_isa() < PQ_ISA_AVX512 || (cap && strcmp(cap, "avx512") == 0)) return 0;
    unsigned a, b, c, d;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return 0;
    const unsigned amx = 1u << 22 | 1u << 24 | 1u << 25; // AMX-BF16, AMX-TILE, AMX-INT8
    if ((d & amx) != amx) return 0;
    unsigned lo, hi;
    __asm__ volatile("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
    if ((lo & (3u << 17)) != (3u << 17)) return 0; // XTILECFG and XTILEDATA state enabled by the OS
    return syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA) == 0;
}

int pq_cpu_amx(void) {
    static int cached = -1;
    if (cached < 0) cached = detect_amx();
    return cached;
}
