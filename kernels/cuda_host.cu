// Device discovery and host-side CUDA helpers for C callers (kernels/cuda_host.h).
#include "kernels/cuda_util.cuh"

#include "kernels/cuda_host.h"

// Compute capability the kernels are built for (sm_80, sm_90 + compute_90 PTX).
#define MIN_CC_MAJOR 8

// The usable devices: their count, the first one's index (-1: none) and, when
// there is none, why (the last reason seen).
static int scan_devices(int *first, char *why, size_t cap) {
    int n = 0, usable = 0;
    *first = -1;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess) {
        (void)cudaGetLastError();
        snprintf(why, cap, "cudaGetDeviceCount: %s", cudaGetErrorString(e));
        return 0;
    }
    snprintf(why, cap, "the CUDA runtime reports 0 devices");
    for (int d = 0; d < n; d++) {
        int major = 0, minor = 0;
        e = cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, d);
        if (e == cudaSuccess) e = cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, d);
        if (e != cudaSuccess) {
            (void)cudaGetLastError();
            snprintf(why, cap, "cudaDeviceGetAttribute(device %d): %s", d, cudaGetErrorString(e));
        } else if (major < MIN_CC_MAJOR) {
            snprintf(why, cap, "device %d has compute capability %d.%d; pq's CUDA kernels need %d.0 or newer", d,
                     major, minor, MIN_CC_MAJOR);
        } else {
            if (*first < 0) *first = d;
            usable++;
        }
    }
    return usable;
}

int pq_cuda_first_device(char *why, size_t cap) {
    int first;
    scan_devices(&first, why, cap);
    return first;
}

int pq_cuda_device_count(void) {
    char why[256];
    int first;
    return scan_devices(&first, why, sizeof why);
}

pq_status pq_cuda_device_info_get(pq_cuda_device_info *out) {
    memset(out, 0, sizeof *out);
    int dev = 0, clock_khz = 0, bus_bits = 0;
    cudaDeviceProp p;
    PQ_CUDA_TRY(cudaGetDevice(&dev));
    PQ_CUDA_TRY(cudaGetDeviceProperties(&p, dev));
    PQ_CUDA_TRY(cudaDeviceGetAttribute(&clock_khz, cudaDevAttrMemoryClockRate, dev));
    PQ_CUDA_TRY(cudaDeviceGetAttribute(&bus_bits, cudaDevAttrGlobalMemoryBusWidth, dev));
    snprintf(out->name, sizeof out->name, "%s", p.name);
    out->cc_major = p.major, out->cc_minor = p.minor, out->sms = p.multiProcessorCount;
    out->mem_bytes = p.totalGlobalMem, out->l2_bytes = (size_t)p.l2CacheSize;
    out->peak_gbs = 2.0 * clock_khz * 1e3 * (bus_bits / 8.0) / 1e9;
    return PQ_OK;
}

pq_status pq_cuda_alloc(size_t bytes, void **d) {
    *d = NULL;
    PQ_CUDA_TRY(cudaMalloc(d, bytes ? bytes : 1));
    return PQ_OK;
}

void pq_cuda_free(void *d) { cudaFree(d); }

pq_status pq_cuda_to_device(void *d, const void *h, size_t bytes) {
    PQ_CUDA_TRY(cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice));
    return PQ_OK;
}

pq_status pq_cuda_stream_create(void **stream) {
    cudaStream_t s = NULL;
    *stream = NULL;
    PQ_CUDA_TRY(cudaStreamCreate(&s));
    *stream = s;
    return PQ_OK;
}

void pq_cuda_stream_destroy(void *stream) {
    if (stream) cudaStreamDestroy((cudaStream_t)stream);
}

pq_status pq_cuda_time(void *stream, pq_cuda_work fn, void *ud, int warmup, int reps, double *ms_per_call) {
    *ms_per_call = 0;
    cudaStream_t st = (cudaStream_t)stream;
    cudaEvent_t e0 = NULL, e1 = NULL;
    pq_status s = PQ_OK;
    float ms = 0;
    for (int i = 0; i < warmup && s == PQ_OK; i++) s = fn(ud, i);
    if (s != PQ_OK) goto done;
    PQ_CHECK_GOTO(cudaEventCreate(&e0) != cudaSuccess || cudaEventCreate(&e1) != cudaSuccess, s, PQ_ERR_CUDA,
                  "cudaEventCreate: %s", cudaGetErrorString(cudaGetLastError()));
    PQ_CHECK_GOTO(cudaEventRecord(e0, st) != cudaSuccess, s, PQ_ERR_CUDA, "cudaEventRecord: %s",
                  cudaGetErrorString(cudaGetLastError()));
    for (int i = 0; i < reps && s == PQ_OK; i++) s = fn(ud, i);
    if (s != PQ_OK) goto done;
    PQ_CHECK_GOTO(cudaEventRecord(e1, st) != cudaSuccess || cudaEventSynchronize(e1) != cudaSuccess ||
                      cudaEventElapsedTime(&ms, e0, e1) != cudaSuccess,
                  s, PQ_ERR_CUDA, "timing events: %s", cudaGetErrorString(cudaGetLastError()));
    *ms_per_call = ms / (reps > 0 ? reps : 1);
done:
    cudaStreamSynchronize(st);
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    return s;
}

// In pq_cuda_time_graph: a failing call sets s (PQ_ERR_CUDA naming it) and
// goes to the clean-up.
#define GRAPH_TRY(call)                                                                        \
    do {                                                                                       \
        cudaError_t graph_e_ = (call);                                                         \
        if (graph_e_ != cudaSuccess) {                                                         \
            s = PQ_FAIL(PQ_ERR_CUDA, "%s: %s", #call, cudaGetErrorString(graph_e_));           \
            goto done;                                                                         \
        }                                                                                      \
    } while (0)

pq_status pq_cuda_time_graph(void *stream, pq_cuda_work fn, void *ud, int warmup, int per_graph, int replays,
                             double *ms_per_call) {
    *ms_per_call = 0;
    PQ_FAIL_IF(per_graph < 1 || replays < 1, PQ_ERR_ARG, "a graph of %d calls replayed %d times", per_graph, replays);
    cudaStream_t st = (cudaStream_t)stream;
    cudaEvent_t e0 = NULL, e1 = NULL;
    cudaGraph_t g = NULL;
    cudaGraphExec_t x = NULL;
    pq_status s = PQ_OK;
    float ms = 0;
    for (int i = 0; i < warmup && s == PQ_OK; i++) s = fn(ud, i);
    if (s != PQ_OK) goto done;
    GRAPH_TRY(cudaStreamSynchronize(st));
    GRAPH_TRY(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < per_graph && s == PQ_OK; i++) s = fn(ud, i);
    {
        cudaError_t e = cudaStreamEndCapture(st, &g); // ends the capture even after a failed call
        if (s != PQ_OK) goto done;
        PQ_CHECK_GOTO(e != cudaSuccess, s, PQ_ERR_CUDA, "cudaStreamEndCapture: %s", cudaGetErrorString(e));
    }
    GRAPH_TRY(cudaGraphInstantiate(&x, g, 0));
    GRAPH_TRY(cudaGraphLaunch(x, st));
    GRAPH_TRY(cudaEventCreate(&e0));
    GRAPH_TRY(cudaEventCreate(&e1));
    GRAPH_TRY(cudaEventRecord(e0, st));
    for (int r = 0; r < replays; r++) GRAPH_TRY(cudaGraphLaunch(x, st));
    GRAPH_TRY(cudaEventRecord(e1, st));
    GRAPH_TRY(cudaEventSynchronize(e1));
    GRAPH_TRY(cudaEventElapsedTime(&ms, e0, e1));
    *ms_per_call = ms / ((double)replays * per_graph);
done:
    cudaStreamSynchronize(st);
    (void)cudaGetLastError();
    if (x) cudaGraphExecDestroy(x);
    if (g) cudaGraphDestroy(g);
    if (e0) cudaEventDestroy(e0);
    if (e1) cudaEventDestroy(e1);
    return s;
}

typedef struct {
    void *dst;
    const void *src;
    size_t bytes;
    cudaStream_t st;
} copy_job;

static pq_status copy_once(void *ud, int i) {
    copy_job *j = (copy_job *)ud;
    PQ_CUDA_TRY(cudaMemcpyAsync(j->dst, j->src, j->bytes, cudaMemcpyDeviceToDevice, j->st));
    return PQ_OK;
}

pq_status pq_cuda_copy_gbs(size_t bytes, int reps, double *gbs) {
    *gbs = 0;
    copy_job j = {NULL, NULL, bytes, NULL};
    void *a = NULL, *b = NULL, *st = NULL;
    double ms = 0;
    pq_status s = pq_cuda_alloc(bytes, &a);
    if (s == PQ_OK) s = pq_cuda_alloc(bytes, &b);
    if (s == PQ_OK) s = pq_cuda_stream_create(&st);
    if (s == PQ_OK) {
        j.dst = b, j.src = a, j.st = (cudaStream_t)st;
        (void)cudaMemsetAsync(a, 1, bytes, j.st);
        s = pq_cuda_time(st, copy_once, &j, 2, reps, &ms);
    }
    if (s == PQ_OK && ms > 0) *gbs = 2.0 * bytes / (ms * 1e-3) / 1e9;
    pq_cuda_stream_destroy(st);
    pq_cuda_free(a);
    pq_cuda_free(b);
    return s;
}
