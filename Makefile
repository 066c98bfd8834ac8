# longnet-gpt: `make train` and `make test` do everything on a fresh Debian machine with the
# CUDA toolkit: install what is missing, build, prepare the corpus, run.
.DEFAULT_GOAL := help
SHELL := /bin/bash

CUDA_HOME ?= /usr/local/cuda
NVCC ?= $(CUDA_HOME)/bin/nvcc
CXX ?= g++
# x86-64-v3 (AVX2, FMA) rather than -march=native: binaries built here also run on the GPU
# machines' hosts.
CXXFLAGS ?= -O2 -std=c++17 -march=x86-64-v3 -fopenmp -Wall -Wextra -I.
CUDA_ARCH ?= -gencode=arch=compute_90a,code=sm_90a
NVCCFLAGS ?= -O2 -std=c++17 $(CUDA_ARCH) -I. -Xcompiler "-fopenmp -march=x86-64-v3 -Wall" --expt-relaxed-constexpr
SPM_LIBS := -lsentencepiece -lsentencepiece_train -lpthread
NVCC_LIBS := -lgomp $(SPM_LIBS)
# cuBLASLt is not linked: build/obj/cublaslt_loader.o loads it at the first product (-ldl).
GPU_LIBS := -lcudnn -ldl $(NVCC_LIBS)

# Say which optional pieces were found (the CUDA path links cuDNN and NCCL; cuBLASLt it loads at run time).
HAVE_NVCC := $(shell test -x $(NVCC) && echo yes || echo no)
HAVE_CUDNN := $(shell test -f $(CUDA_HOME)/include/cudnn.h -o -f /usr/include/cudnn.h && echo yes || echo no)
HAVE_NCCL := $(shell test -f $(CUDA_HOME)/include/nccl.h -o -f /usr/include/nccl.h && echo yes || echo no)
$(info build: nvcc=$(HAVE_NVCC) cudnn=$(HAVE_CUDNN) nccl=$(HAVE_NCCL) (CUDA_HOME=$(CUDA_HOME)))
ifneq ($(HAVE_NVCC),yes)
$(error nvcc not found at $(NVCC): install the CUDA toolkit or set CUDA_HOME)
endif

# Settings of `make train` (any of them can be given on the command line).
TRAIN_OUT ?= out/train
TRAIN_ARGS ?=

.PHONY: help all deps train test test-gpu bench clean fuzz
help:
	@echo "make train   install deps, build, prepare the corpus, train the default model, sample"
	@echo "make test    install deps, build everything (CUDA files too), run all CPU tests"
	@echo "make train TEXT=path   the same on your own text: a file, or a directory of files in any layout"
	@echo "             its vocabulary by the text's size (DATA_VOCAB=N to choose); it samples from held-out text"
	@echo "make data    prepare corpus/ (tokenizer and token shards) only"
	@echo "             CORPUS=long: the long-document corpus in corpus-long/ (make train CORPUS=long too)"
	@echo "make all     build only"
	@echo "make fuzz    run the libFuzzer harnesses for FUZZ_SECONDS (300) each (tests/fuzz/)"

build:
	@mkdir -p build

build/test_model_cpu: tests/test_model_cpu.cpp $(wildcard core/*.h comm/*.h layers/*.h layers/patterns/*.h model/*.h optim/*.h tests/*.h) | build
	$(CXX) $(CXXFLAGS) -o $@ $<

build/test_attention_probe_cpu: tests/test_attention_probe_cpu.cpp $(wildcard core/*.h comm/*.h data/*.h eval/*.h layers/*.h layers/patterns/*.h model/*.h optim/*.h tests/*.h) | build
	$(CXX) $(CXXFLAGS) -o $@ $<

# The copy loss (eval/copy_loss.h) over a haystack of a tokenizer it trains: SentencePiece's libraries.
build/test_copy_loss_cpu: tests/test_copy_loss_cpu.cpp $(wildcard core/*.h comm/*.h data/*.h eval/*.h layers/*.h layers/patterns/*.h model/*.h optim/*.h tests/*.h) | build build/.deps-data
	$(CXX) $(CXXFLAGS) -o $@ $< $(SPM_LIBS)

build/test_inputs_cpu: tests/test_inputs_cpu.cpp tests/check.h $(wildcard core/*.h comm/*.h layers/*.h layers/patterns/*.h model/*.h optim/*.h data/*.h) | build
	$(CXX) $(CXXFLAGS) -o $@ $<

build/test_attention_cpu: tests/test_attention_cpu.cpp tests/attention_cases.h tests/attention_checks.h tests/check.h tests/attention_branchwise.h $(wildcard core/*.h comm/*.h layers/*.h layers/patterns/*.h core/rng.h) | build
	$(CXX) $(CXXFLAGS) -o $@ $<

build/test_ring_cpu: tests/test_ring_cpu.cpp tests/attention_cases.h tests/attention_checks.h tests/check.h $(wildcard core/*.h comm/*.h layers/*.h layers/patterns/*.h core/rng.h) | build
	$(CXX) $(CXXFLAGS) -o $@ $< -lpthread

build/test_cp_train_cpu: tests/test_cp_train_cpu.cpp tests/check.h $(wildcard core/*.h comm/*.h layers/*.h layers/patterns/*.h model/*.h optim/*.h core/rng.h) | build
	$(CXX) $(CXXFLAGS) -o $@ $< -lpthread

# cuBLASLt's loader without a GPU: every function the programs call is found and reached.
build/test_cublaslt_loader: tests/test_cublaslt_loader.cpp tests/check.h build/obj/cublaslt_loader.o | build
	$(CXX) $(CXXFLAGS) -I$(CUDA_HOME)/include -o $@ $< build/obj/cublaslt_loader.o -ldl

build/test_model_cpu_broken_gelu: tests/test_model_cpu.cpp $(wildcard core/*.h comm/*.h layers/*.h layers/patterns/*.h model/*.h optim/*.h tests/*.h) | build
	$(CXX) $(CXXFLAGS) -DBREAK_GELU_BACKWARD -o $@ $<

# GPU tests and benchmarks: every tests/gpu/test_*.cu and bench/bench_*.cu builds to
# build/<name>. CI (no GPU) builds them all; `make test-gpu` and `make bench` run them.
GPU_SOURCES := $(wildcard tests/gpu/test_*.cu bench/bench_*.cu)
ifneq ($(HAVE_NCCL),yes)
GPU_SOURCES := $(filter-out tests/gpu/test_comm_nccl.cu,$(GPU_SOURCES))  # needs NCCL
endif
GPU_BINARIES := $(patsubst %.cu,build/%,$(notdir $(GPU_SOURCES)))

# CUDA programs (train, infer, attention_tool, the GPU tests and benchmarks): each .cu is compiled
# once into build/obj/<name>.o, and a program is its own object linked with the objects it uses.
# The tests and benchmarks get -lineinfo (compute-sanitizer reports source lines).
#
# Attention, compiled once: each layers/cuda/attention_*.cu and the instantiation units
# of our kernels, layers/cuda/attention/attention_*.cu, are built into build/obj/ and linked into
# the programs that use them; the headers programs include (layers/cuda/attention_flash.h,
# attention_cudnn.h) only declare the launchers.
#   attention_flash.o           our kernels: the public launchers, dense and dilated, with the tile
#                               variants the model runs (forward 0, backward 0 and deterministic)
#   attention_flash_variants.o  the tile variants only the tests and the benchmark compare
#                               (programs that include attention_flash_variants.h)
#   attention_cudnn.o           the cuDNN SDPA launchers and graph code
# A program missing from the list it needs fails to link (undefined reference). The attention
# objects get -lineinfo too (line tables only: the machine code is the same).
ATTN_USERS := train infer attention_tool test_model test_kv_cache test_ops bench_kv_cache bench_train bench_recompute test_attention test_attention_two_sided test_ring test_cp_train bench_ring \
              bench_attention bench_attention_dilated bench_attention_block_sparse
ATTN_VARIANT_USERS := test_attention test_attention_two_sided bench_attention bench_attention_dilated bench_attention_block_sparse
ATTN_CUDNN_USERS := train infer attention_tool test_model test_kv_cache bench_kv_cache bench_train bench_recompute test_cp_train test_attention bench_attention_cudnn \
                    bench_attention
$(addprefix build/,$(ATTN_USERS)): build/obj/attention_flash.o
$(addprefix build/,$(ATTN_VARIANT_USERS)): build/obj/attention_flash_variants.o
$(addprefix build/,$(ATTN_CUDNN_USERS)): build/obj/attention_cudnn.o

# NCCL, one process per GPU (comm/nccl.h): comm/nccl.cu is compiled once into build/obj/nccl.o;
# the programs that can run as NCCL ranks link it and -lnccl, and their objects see HAVE_NCCL
# (model/launch.cuh). Without NCCL they build without it (launcher-started ranks are refused).
NCCL_USERS := train infer test_comm_nccl test_ring
ifeq ($(HAVE_NCCL),yes)
$(patsubst %,build/obj/%.o,$(NCCL_USERS)): NVCCFLAGS += -DHAVE_NCCL
$(addprefix build/,$(NCCL_USERS)): build/obj/nccl.o
$(addprefix build/,$(NCCL_USERS)): GPU_LIBS += -lnccl
endif

CUDA_PROGRAMS := build/train build/infer build/attention_tool $(GPU_BINARIES)
$(CUDA_PROGRAMS): build/%: build/obj/%.o build/obj/cublaslt_loader.o | build
	$(NVCC) $(NVCCFLAGS) -o $@ $(filter %.o,$^) $(GPU_LIBS)
build/obj/cublaslt_loader.o: layers/cuda/cublaslt_loader.cpp | build/obj
	$(CXX) $(CXXFLAGS) -I$(CUDA_HOME)/include -c -o $@ $<

# -MMD -MP: build/obj/<name>.o.d lists the headers the object included, so an edit of any of them
# rebuilds exactly the objects that included it (and a deleted header breaks nothing).
NVCC_COMPILE = $(NVCC) $(NVCCFLAGS) -MMD -MP -MF $@.d -c -o $@ $<
build/obj/train.o: train.cu build/obj/train.o.d | build/obj
	$(NVCC_COMPILE)
build/obj/infer.o: infer.cu build/obj/infer.o.d | build/obj
	$(NVCC_COMPILE)
build/obj/attention_tool.o: tools/attention_tool.cu build/obj/attention_tool.o.d | build/obj
	$(NVCC_COMPILE)
build/obj/test_%.o: tests/gpu/test_%.cu build/obj/test_%.o.d | build/obj
	$(NVCC_COMPILE) -lineinfo
build/obj/bench_%.o: bench/bench_%.cu build/obj/bench_%.o.d | build/obj
	$(NVCC_COMPILE) -lineinfo
build/obj/attention_%.o: layers/cuda/attention_%.cu build/obj/attention_%.o.d | build/obj
	$(NVCC_COMPILE) -lineinfo
build/obj/attention_%.o: layers/cuda/attention/attention_%.cu build/obj/attention_%.o.d | build/obj
	$(NVCC_COMPILE) -lineinfo
build/obj/nccl.o: comm/nccl.cu build/obj/nccl.o.d | build/obj
	$(NVCC_COMPILE) -lineinfo

# The .d files are named as targets (so never taken for intermediate files): a missing one (a
# first build, or a build/ from before the .d files) counts as changed, so its object is rebuilt.
NVCC_DEPFILES := $(patsubst build/%,build/obj/%.o.d,$(CUDA_PROGRAMS)) \
                 $(patsubst %.cu,build/obj/%.o.d,$(notdir $(wildcard layers/cuda/attention_*.cu layers/cuda/attention/attention_*.cu))) \
                 build/obj/nccl.o.d
$(NVCC_DEPFILES):
-include $(wildcard build/obj/*.d)
# The benchmarks were in tests/gpu/ once: a build/obj/bench_*.o.d from then names its source
# there, and this rule (nothing to make, so the object counts as changed) rebuilds it from bench/.
tests/gpu/bench_%.cu: ;

build/obj:
	@mkdir -p build/obj

include data/rules.mk
include tests/rules.mk
include tests/fuzz/rules.mk

BINARIES := build/train build/infer build/attention_tool build/data_tool build/test_data build/test_tasks build/test_ops_cpu build/test_model_cpu build/test_copy_loss_cpu build/test_attention_probe_cpu build/test_inputs_cpu build/test_attention_cpu build/test_ring_cpu build/test_cp_train_cpu build/test_rendezvous build/test_cublaslt_loader $(GPU_BINARIES)
all: deps
	$(MAKE) -j2 $(BINARIES)

deps: deps-data

# Trains from scratch into $(TRAIN_OUT) (an earlier run there is moved aside, never deleted),
# then plots the loss curve.
train: deps
	$(MAKE) -j2 build/train build/infer build/data_tool
	$(MAKE) data
	@if [ -e $(TRAIN_OUT) ]; then mv $(TRAIN_OUT) $(TRAIN_OUT).$$(date +%Y%m%d-%H%M%S); fi
	./build/train --data $(DATA_DIR) --out $(TRAIN_OUT) $(TRAIN_ARGS)
	scripts/plot_loss.sh $(TRAIN_OUT)/metrics.csv $(TRAIN_OUT)/loss.png

test: deps
	$(MAKE) -j2 $(BINARIES) $(FUZZ_BINARIES) build/test_ops_cpu_broken_gelu build/test_model_cpu_broken_gelu
	tests/run_all.sh

# On a machine with an NVIDIA GPU (H100/H200): every kernel against the CPU reference.
test-gpu: deps
	$(MAKE) -j4 $(BINARIES)
	BIN=build OUT=build/test-gpu LOGS=build/logs scripts/device.sh tests sanitizers

bench: deps
	$(MAKE) -j4 $(GPU_BINARIES)
	bench/run_bench.sh

clean:
	rm -rf build
