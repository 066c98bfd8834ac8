# Data pipeline rules. Included by the top-level Makefile, which defines CXX, CXXFLAGS
# (with -I. so that "data/..." and "layers/..." includes resolve) and uses build/ for outputs.
#
#   make deps-data    install the Debian packages the project needs (only the missing ones)
#   make data         raw corpus (corpus/raw) -> corpus/{tokenizer.model,train.bin,val.bin,manifest.txt}
#   make test-data    build and run the data pipeline tests (< 2 minutes on 2 cores)
#
# Binaries that only load a tokenizer (training, generation) link $(TOKENIZER_LDLIBS).

DATA_VOCAB ?= 8192
DATA_PREPARE_FLAGS ?=
DATA_LDLIBS := -lsentencepiece_train -lsentencepiece -lpthread
TOKENIZER_LDLIBS := -lsentencepiece -lpthread

DATA_TOOL_HEADERS := data/corpus.h data/encode_docs.h data/io.h data/shard.h data/tokenizer.h \
                     data/train_tokenizer.h layers/common.h
TEST_DATA_HEADERS := $(DATA_TOOL_HEADERS) data/loader.h data/rng.h

.PHONY: deps-data data test-data

deps-data:
	scripts/install_deps.sh

# Compiling needs the SentencePiece headers: install the packages once per build/ directory
# (order-only, so the stamp's age never triggers a rebuild).
build/.deps-data: scripts/install_deps.sh
	@mkdir -p $(@D)
	scripts/install_deps.sh
	@touch $@

build/data_tool: data/prepare.cpp $(DATA_TOOL_HEADERS) | build/.deps-data
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS) -o $@ $< $(DATA_LDLIBS)

build/test_data: tests/test_data.cpp $(TEST_DATA_HEADERS) | build/.deps-data
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS) -o $@ $< $(DATA_LDLIBS)

# get_corpus.sh is idempotent and writes SOURCES.txt last, so SOURCES.txt marks a complete
# raw corpus. No prerequisites: an existing raw corpus is never re-downloaded by make.
corpus/raw/SOURCES.txt:
	scripts/get_corpus.sh corpus/raw

# data_tool prepare writes train.bin last, so this one target stands for all four outputs.
corpus/train.bin: corpus/raw/SOURCES.txt build/data_tool
	build/data_tool prepare --raw corpus/raw --out corpus --vocab $(DATA_VOCAB) $(DATA_PREPARE_FLAGS)

corpus/val.bin corpus/tokenizer.model corpus/manifest.txt: corpus/train.bin ;

data: corpus/train.bin

test-data: build/test_data build/data_tool
	build/test_data
	tests/test_data_cli.sh
