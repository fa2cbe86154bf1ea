# pq — build, test, bench.
#   make            build/pq and build/libpq.a (CUDA objects too when nvcc exists)
#   make demo       install missing Debian packages (as root), build, quantize SmolLM2-135M every
#                   main way and print one table (tools/demo.sh; CALIB=, WIKI=, WINDOWS= override)
#   make demo-fixture  build and run pq ppl on the stories260K fixture (its golden PPL)
#   make test       unit, golden, CLI and fuzz-replay tests; ends with "N passed, N failed"
#   make check-layers  every #include points down the layers (docs/ARCHITECTURE.md); run by make test
#   make test-oracles  pq against transformers on SmolLM2 (torch venv; minutes)
#   make test-gpu   the same, but a missing GPU is a failure
#   make bench      benchmarks (ratios measured in one run)
#   make bench-compare  pq vs llama.cpp (and llm-compressor) on SmolLM2, appended to docs/PERFORMANCE.md
#   make fuzz       libFuzzer targets under ASan/UBSan (clang)

CC      ?= gcc
NVCC    ?= $(shell command -v nvcc 2>/dev/null)
CUDA_HOME ?= $(patsubst %/bin/nvcc,%,$(NVCC))
BUILD   := build
SHARED  ?= ../shared

CFLAGS_BASE := -std=c11 -D_GNU_SOURCE -O2 -g -ffp-contract=off -fno-math-errno \
               -Wall -Wextra -Wno-unused-parameter -pthread -I. -MMD -MP
CFLAGS  ?=
CFLAGS  += $(CFLAGS_BASE)
# optimized kernels are compiled for their ISA per file and chosen at run time
AVX2_FLAGS   := -mavx2 -mfma -mf16c
AVX512_FLAGS := -mavx2 -mfma -mf16c -mavx512f -mavx512bw -mavx512vl -mavx512dq -mavx512vnni
AMX_FLAGS    := $(AVX512_FLAGS) -mamx-tile -mamx-int8 -mamx-bf16
SHANI_FLAGS  := -msse4.1 -msha
LDLIBS  := -ljansson -lzstd -ldl -lm -pthread

LIB_DIRS := common formats formats/tokenizer kernels eval calib quant
LIB_SRC  := $(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.c))
LIB_OBJ  := $(patsubst %.c,$(BUILD)/obj/%.o,$(LIB_SRC))
TOOL_SRC := $(wildcard tools/*.c)
TOOL_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(TOOL_SRC))
TEST_SRC := $(wildcard tests/test_*.c)
TEST_BIN := $(patsubst tests/%.c,$(BUILD)/tests/%,$(TEST_SRC))
BENCH_SRC := $(wildcard tests/bench_*.c)
BENCH_BIN := $(patsubst tests/%.c,$(BUILD)/tests/%,$(BENCH_SRC))
# test-only code (random models, CUDA host wrappers): linked into tests and benchmarks, not libpq
TESTLIB_OBJ := $(patsubst %.c,$(BUILD)/obj/%.o,$(wildcard tests/lib/*.c))
FUZZ_SRC := $(wildcard tests/fuzz/fuzz_*.c)
FUZZ_REPLAY := $(patsubst tests/fuzz/%.c,$(BUILD)/fuzz/replay_%,$(FUZZ_SRC))
# tests that must run without undefined behaviour: tests/ubsan_<x>.c linked
# with a libpq built under UBSan (no CUDA), run by make test as test_ubsan_<x>
UBSAN_FLAGS := -fsanitize=undefined -fno-sanitize-recover=undefined
UBSAN_OBJ := $(patsubst %.c,$(BUILD)/ubsan/obj/%.o,$(LIB_SRC))
UBSAN_BIN := $(patsubst tests/ubsan_%.c,$(BUILD)/tests/test_ubsan_%,$(wildcard tests/ubsan_*.c))

ifneq ($(NVCC),)
CU_SRC   := $(foreach d,$(LIB_DIRS),$(wildcard $(d)/*.cu))
CU_OBJ   := $(patsubst %.cu,$(BUILD)/obj/%.cu.o,$(CU_SRC))
TESTLIB_OBJ += $(patsubst %.cu,$(BUILD)/obj/%.cu.o,$(wildcard tests/lib/*.cu))
CFLAGS   += -DPQ_HAVE_CUDA=1
NVCCFLAGS := -O2 -std=c++17 -I. -Xcompiler -fPIC,-Wall -DPQ_HAVE_CUDA=1 \
             -gencode arch=compute_80,code=sm_80 -gencode arch=compute_90,code=sm_90 \
             -gencode arch=compute_90,code=compute_90
LDLIBS   += -L$(CUDA_HOME)/lib64 -Wl,-rpath,$(CUDA_HOME)/lib64 -lcusolver -lcublasLt -lcublas -lcudart -lstdc++
endif

.PHONY: all demo demo-fixture test test-gpu test-oracles bench bench-compare fuzz clean deps check-layers
all: $(BUILD)/pq

$(BUILD)/obj/%_avx2.o: %_avx2.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(AVX2_FLAGS) -c $< -o $@

$(BUILD)/obj/%_avx512.o: %_avx512.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(AVX512_FLAGS) -c $< -o $@

$(BUILD)/obj/%_amx.o: %_amx.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(AMX_FLAGS) -c $< -o $@

$(BUILD)/obj/%_shani.o: %_shani.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) $(SHANI_FLAGS) -c $< -o $@

$(BUILD)/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -c $< -o $@

$(BUILD)/obj/%.cu.o: %.cu
	@mkdir -p $(dir $@)
	$(NVCC) $(NVCCFLAGS) -MMD -MP -c $< -o $@

$(BUILD)/ubsan/obj/%_avx2.o: %_avx2.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(UBSAN_FLAGS) $(AVX2_FLAGS) -c $< -o $@

$(BUILD)/ubsan/obj/%_avx512.o: %_avx512.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(UBSAN_FLAGS) $(AVX512_FLAGS) -c $< -o $@

$(BUILD)/ubsan/obj/%_amx.o: %_amx.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(UBSAN_FLAGS) $(AMX_FLAGS) -c $< -o $@

$(BUILD)/ubsan/obj/%_shani.o: %_shani.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(UBSAN_FLAGS) $(SHANI_FLAGS) -c $< -o $@

$(BUILD)/ubsan/obj/%.o: %.c
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(UBSAN_FLAGS) -c $< -o $@

$(BUILD)/ubsan/libpq.a: $(UBSAN_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/tests/test_ubsan_%: tests/ubsan_%.c tests/test.h $(BUILD)/ubsan/libpq.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS_BASE) $(UBSAN_FLAGS) -o $@ $< $(BUILD)/ubsan/libpq.a -ljansson -lzstd -ldl -lm -pthread

$(BUILD)/libpq.a: $(LIB_OBJ) $(CU_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/libpq_test.a: $(TESTLIB_OBJ)
	@rm -f $@
	ar rcs $@ $^

$(BUILD)/pq: $(TOOL_OBJ) $(BUILD)/libpq.a
	$(CC) $(CFLAGS) -o $@ $(TOOL_OBJ) $(BUILD)/libpq.a $(LDLIBS)

$(BUILD)/tests/%: tests/%.c tests/test.h $(BUILD)/libpq_test.a $(BUILD)/libpq.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libpq_test.a $(BUILD)/libpq.a $(LDLIBS)

# helpers of make test-oracles (tests/oracles/*.c)
$(BUILD)/oracles/%: tests/oracles/%.c $(BUILD)/libpq.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< $(BUILD)/libpq.a $(LDLIBS)

# fuzz targets built as plain programs that replay their corpus (run by make test)
$(BUILD)/fuzz/replay_%: tests/fuzz/%.c tests/fuzz/replay_main.c $(BUILD)/libpq.a
	@mkdir -p $(dir $@)
	$(CC) $(CFLAGS) -o $@ $< tests/fuzz/replay_main.c $(BUILD)/libpq.a $(LDLIBS)

deps:
	@sh tools/deps.sh

demo:
	@sh tools/deps.sh demo
	@$(MAKE) --no-print-directory all
	@SHARED=$(SHARED) sh tools/demo.sh

demo-fixture: deps all
	$(BUILD)/pq ppl $(SHARED)/fixtures/stories260K --text $(SHARED)/data/tinystories_val_prefix.txt \
	    --protocol gptq --bos --ctx 256

test:
	@sh tools/deps.sh
	@$(MAKE) --no-print-directory all $(TEST_BIN) $(FUZZ_REPLAY) $(UBSAN_BIN)
	@PQ_SHARED=$(SHARED) sh tests/run.sh

test-gpu:
	@sh tools/deps.sh
	@$(MAKE) --no-print-directory all $(TEST_BIN) $(FUZZ_REPLAY) $(UBSAN_BIN)
	@PQ_SHARED=$(SHARED) PQ_REQUIRE_GPU=1 sh tests/run.sh

test-oracles:
	@$(MAKE) --no-print-directory all $(BUILD)/tests/test_gguf_model $(BUILD)/oracles/dump_logits
	@PQ_SHARED=$(SHARED) sh tests/oracles/run.sh

bench: all $(BENCH_BIN)
	@for b in $(BENCH_BIN); do echo "== $$b"; PQ_SHARED=$(SHARED) $$b || exit 1; done

bench-compare: all
	@PQ_SHARED=$(SHARED) sh tools/bench_compare.sh

fuzz:
	@sh tests/fuzz/run_fuzzers.sh

check-layers:
	@sh tools/check_layers.sh

clean:
	rm -rf $(BUILD)

-include $(shell find $(BUILD) -name '*.d' 2>/dev/null)
