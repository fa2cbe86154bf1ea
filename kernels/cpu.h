// kernels/cpu.h — which optimized CPU kernel set this machine runs.
//
// Kernels come in a plain C _ref version (the specification, any CPU) and
// optimized versions compiled per file for one ISA (*_avx2.c: AVX2+FMA+F16C,
// *_avx512.c: AVX-512 F/BW/VL/DQ/VNNI). Callers ask here which one to use.
#ifndef PQ_CPU_H
#define PQ_CPU_H

typedef enum { PQ_ISA_SCALAR = 0, PQ_ISA_AVX2 = 1, PQ_ISA_AVX512 = 2 } pq_isa;

// The best ISA this CPU supports, capped by PQ_ISA=scalar|avx2|avx512 in the
// environment (so tests and users can force a slower path; PQ_ISA=amx is
// AVX-512 here, with pq_cpu_amx() below). Cached.
pq_isa pq_cpu_isa(void);
const char *pq_isa_name(pq_isa isa);

// Whether the CPU has the SHA extensions (CPUID 7.0:EBX bit 29) and
// PQ_ISA does not cap the kernels at scalar. Cached.
int pq_cpu_sha(void);

// Whether the W8A8 GEMMs of kernels/w8a8.h run on AMX tiles (INT8 and
// BF16): the CPU has AMX-TILE, AMX-INT8 and AMX-BF16, the OS saves the tile
// state and granted this process its use, pq_cpu_isa() is AVX-512, and
// PQ_ISA does not name a lower level (PQ_ISA=avx512 keeps the VNNI / sgemm
// kernels on an AMX machine; INT8 results are the same bits). Cached.
int pq_cpu_amx(void);

#endif
