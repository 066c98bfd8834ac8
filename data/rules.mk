# Data pipeline rules. Included by the top-level Makefile, which defines CXX, CXXFLAGS
# (with -I. so that "data/..." and "layers/..." includes resolve) and uses build/ for outputs.
#
#   make deps-data    install the Debian packages the project needs (only the missing ones)
#   make data         raw corpus (corpus/raw) -> corpus/{tokenizer.model,train.bin,val.bin,manifest.txt}
#   make data TEXT=path     your own text (a file, or a directory of files in any layout) in
#                     corpus-text/; `make train TEXT=path` trains on it
#   make data CORPUS=long   the long-document corpus instead (scripts/get_long_corpus.sh: the
#                     Bible's books, two manuals and the Linux kernel's subsystems, ~46M tokens)
#                     in corpus-long/; `make train CORPUS=long` trains on it
#   make test-data    build and run the data pipeline tests (< 2 minutes on 2 cores)
#
# Binaries that only load a tokenizer (training, generation) link $(TOKENIZER_LDLIBS).

# The tokenizer's vocabulary; for TEXT, "auto" suits it to the text's size (scripts/prepare_text.sh).
DATA_VOCAB ?= $(if $(value TEXT),auto,8192)
DATA_PREPARE_FLAGS ?=
DATA_LDLIBS := -lsentencepiece_train -lsentencepiece -lpthread
TOKENIZER_LDLIBS := -lsentencepiece -lpthread

DATA_TOOL_HEADERS := data/corpus.h data/encode_docs.h core/io.h data/shard.h data/tokenizer.h \
                     data/train_tokenizer.h data/tasks.h data/quote_tasks.h data/task_file.h core/rng.h core/json.h core/error.h \
                     core/output_path.h core/flags.h core/run_lock.h core/lists.h
TEST_DATA_HEADERS := $(DATA_TOOL_HEADERS) data/loader.h core/rng.h tests/check.h

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

# The retrieval tasks (generators, task files, mixed batches, the scorer with a mock model).
build/test_tasks: tests/test_tasks.cpp tests/test_text.h $(TEST_DATA_HEADERS) data/batch_source.h $(wildcard core/*.h eval/*.h model/*.h optim/*.h layers/*.h layers/patterns/*.h) | build/.deps-data
	@mkdir -p $(@D)
	$(CXX) $(CXXFLAGS) -o $@ $< $(DATA_LDLIBS)

# TEXT is taken literally, whatever it holds (quotes, spaces, $, a leading -): its value unexpanded,
# as one single-quoted shell word (each ' written '\'').
TEXT_WORD = '$(subst ','\'',$(value TEXT))'

CORPUS ?= default
ifneq ($(value TEXT),)
# Your own text: make train TEXT=path (a text file, or a directory of them in any layout).
DATA_DIR := corpus-text
else ifeq ($(CORPUS),long)
DATA_DIR := corpus-long
GET_CORPUS := scripts/get_long_corpus.sh
else ifeq ($(CORPUS),default)
DATA_DIR := corpus
GET_CORPUS := scripts/get_corpus.sh
else
$(error CORPUS=$(CORPUS) is unknown: use CORPUS=default (corpus/) or CORPUS=long (corpus-long/))
endif

# The get scripts are idempotent and write SOURCES.txt last, so SOURCES.txt marks a complete
# raw corpus. No prerequisites: an existing raw corpus is never re-downloaded by make.
$(DATA_DIR)/raw/SOURCES.txt:
	$(GET_CORPUS) $(DATA_DIR)/raw

# data_tool prepare writes train.bin last, so this one target stands for all four outputs.
$(DATA_DIR)/train.bin: $(DATA_DIR)/raw/SOURCES.txt build/data_tool
	build/data_tool prepare --raw $(DATA_DIR)/raw --out $(DATA_DIR) --vocab $(DATA_VOCAB) $(DATA_PREPARE_FLAGS)

$(DATA_DIR)/val.bin $(DATA_DIR)/tokenizer.model $(DATA_DIR)/manifest.txt: $(DATA_DIR)/train.bin ;

ifneq ($(value TEXT),)
data: build/data_tool
	scripts/prepare_text.sh $(TEXT_WORD) $(DATA_DIR) $(DATA_VOCAB)
else
data: $(DATA_DIR)/train.bin
endif

test-data: build/test_data build/data_tool
	build/test_data
	tests/test_data_cli.sh
