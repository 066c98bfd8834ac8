# libFuzzer harness rules (tests/fuzz/). Included by the top-level Makefile after tests/rules.mk;
# uses CXX/CXXFLAGS for the seed generator and clang for the harnesses.
#
#   make fuzz-build   build every harness into build/fuzz/ (clang, ASan + UBSan + libFuzzer)
#   make fuzz-smoke   what `make test` runs (tests/fuzz/run_fuzz.sh smoke): every committed seed
#                     and regression input, then each harness fuzzes for a short fixed budget
#                     from a fixed -seed; prints "N passed, M failed"; any crash fails
#   make fuzz         fuzz each harness for FUZZ_SECONDS (default 300), growing the corpus in
#                     build/fuzz/corpus/<harness> (not committed); crashes go to
#                     build/fuzz/artifacts/<harness>/
#   make fuzz-seeds   regenerate the committed seed corpora (tests/fuzz/*/seeds) with make_seeds
#
# The build step of `make test` builds $(FUZZ_BINARIES).

FUZZ_CXX ?= clang++
FUZZ_CXXFLAGS ?= -g -O1 -std=c++17 -I. -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined \
                 -Wall -Wextra -Wno-unknown-pragmas
FUZZ_HARNESSES := json checkpoint shard_loader tokenizer layout kv_cache task_file
FUZZ_BINARIES := $(patsubst %,build/fuzz/fuzz_%,$(FUZZ_HARNESSES))
FUZZ_SECONDS ?= 300
FUZZ_DEPS := tests/fuzz/fuzz_common.h $(wildcard core/*.h comm/*.h layers/*.h layers/patterns/*.h model/*.h optim/*.h data/*.h)

# The order-only build/.deps-data runs scripts/install_deps.sh (clang and the compiler-rt
# runtimes are on its default list, as are the SentencePiece headers).
build/fuzz/fuzz_%: tests/fuzz/fuzz_%.cpp $(FUZZ_DEPS) | build/.deps-data
	@mkdir -p $(@D)
	$(FUZZ_CXX) $(FUZZ_CXXFLAGS) -o $@ $< $(FUZZ_LDLIBS)

build/fuzz/fuzz_tokenizer: FUZZ_LDLIBS := -lsentencepiece -lpthread

build/fuzz/make_seeds: tests/fuzz/make_seeds.cpp $(FUZZ_DEPS) | build/.deps-data
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS) -o $@ $< -lsentencepiece_train -lsentencepiece -lpthread

.PHONY: fuzz fuzz-build fuzz-smoke fuzz-seeds

fuzz-build: $(FUZZ_BINARIES)

fuzz-smoke: $(FUZZ_BINARIES)
	tests/fuzz/run_fuzz.sh smoke

fuzz: $(FUZZ_BINARIES)
	FUZZ_SECONDS=$(FUZZ_SECONDS) tests/fuzz/run_fuzz.sh long

fuzz-seeds: build/fuzz/make_seeds
	build/fuzz/make_seeds tests/fuzz
